import { connect } from 'node:net'

export interface SocketResponse {
  readonly status: number
  /** Header names in lower case. */
  readonly headers: ReadonlyMap<string, string>
  readonly text: string
  /** The parsed body when it is JSON (undefined otherwise). */
  readonly body: unknown
}

export interface SocketRequest {
  method: string
  /** The request target exactly as it goes on the wire (nothing is encoded). */
  target: string
  headers?: Record<string, string>
  /** Bytes written after the head, as they are (the caller frames them: Content-Length or chunks). */
  body?: string | Buffer
  timeoutMs?: number
}

/**
 * Sends one HTTP/1.1 request over a raw socket (node:net), for requests fetch cannot make: a head
 * that announces a body the client never sends, hand-made chunks, an unencoded target. Resolves
 * as soon as one whole response has arrived, without closing the sending side first.
 */
export function sendOverSocket(url: string, request: SocketRequest): Promise<SocketResponse> {
  const { hostname, port } = new URL(url)
  const lines = [`${request.method} ${request.target} HTTP/1.1`, `host: ${hostname}:${port}`]
  for (const [name, value] of Object.entries(request.headers ?? {})) lines.push(`${name}: ${value}`)
  const head = Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1')
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname)
    let received = Buffer.alloc(0)
    const timer = setTimeout(() => {
      socket.destroy()
      reject(
        new Error(
          `no whole response within ${request.timeoutMs ?? 5000} ms: ${received.toString('latin1')}`,
        ),
      )
    }, request.timeoutMs ?? 5000)
    const finish = (): boolean => {
      const parsed = parseResponse(received, request.method === 'HEAD')
      if (parsed === undefined) return false
      clearTimeout(timer)
      socket.destroy()
      resolve(parsed)
      return true
    }
    socket.on('connect', () => {
      socket.write(head)
      if (request.body !== undefined) socket.write(request.body)
    })
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk])
      finish()
    })
    const fail = (error: Error): void => {
      if (finish()) return
      clearTimeout(timer)
      reject(
        new Error(
          `socket closed before a whole response (${error.message}): ${received.toString('latin1')}`,
        ),
      )
    }
    socket.on('error', fail)
    socket.on('close', () => {
      fail(new Error('closed'))
    })
  })
}

function parseResponse(bytes: Buffer, isHead: boolean): SocketResponse | undefined {
  const end = bytes.indexOf('\r\n\r\n')
  if (end === -1) return undefined
  const [statusLine = '', ...headerLines] = bytes.subarray(0, end).toString('latin1').split('\r\n')
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1] ?? Number.NaN)
  const headers = new Map<string, string>()
  for (const line of headerLines) {
    const colon = line.indexOf(':')
    headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim())
  }
  const length =
    isHead || status === 204 || status === 304 ? 0 : Number(headers.get('content-length') ?? 0)
  const rest = bytes.subarray(end + 4)
  if (rest.length < length) return undefined
  const text = rest.subarray(0, length).toString('utf8')
  const body: unknown =
    text !== '' && /json/.test(headers.get('content-type') ?? '') ? JSON.parse(text) : undefined
  return { status, headers, text, body }
}
