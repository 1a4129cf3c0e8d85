/**
 * Webhook receivers on 127.0.0.1 for the delivery tests: a node:http one that records every
 * request it gets and answers as told, and raw `net` servers for the misbehaving kinds (silent,
 * slow, endless, resetting).
 */
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http'
import { createServer as createHttpsServer } from 'node:https'
import { type AddressInfo, createServer as createNetServer, type Socket } from 'node:net'

import { Webhook } from 'standardwebhooks'

/** One request a receiver got. */
export interface Received {
  readonly method: string
  readonly path: string
  readonly headers: IncomingHttpHeaders
  readonly body: Buffer
  readonly remoteAddress: string
  /** Which connection of the receiver it came on, from 0. */
  readonly connection: number
  readonly at: number
}

export interface Receiver {
  readonly url: string
  readonly port: number
  readonly received: Received[]
  /** Connections accepted so far. */
  connections(): number
  /** Resolves at the next request received (or at once when `count` have come already). */
  waitFor(count: number, timeoutMs?: number): Promise<Received[]>
  close(): Promise<void>
}

/** How a receiver answers a request; the default is 204. */
export type Answer = (request: Received, res: ServerResponse) => void

export async function startReceiver(answer?: Answer, host = '127.0.0.1'): Promise<Receiver> {
  const received: Received[] = []
  const waiters: (() => void)[] = []
  let connections = 0
  const sockets = new Set<Socket>()
  const indexes = new WeakMap<Socket, number>()
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      const entry: Received = {
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks),
        remoteAddress: req.socket.remoteAddress ?? '',
        connection: indexes.get(req.socket) ?? -1,
        at: Date.now(),
      }
      received.push(entry)
      for (const wake of waiters.splice(0)) wake()
      if (answer === undefined) res.writeHead(204).end()
      else answer(entry, res)
    })
  })
  server.on('connection', (socket: Socket) => {
    indexes.set(socket, connections)
    connections += 1
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
  })
  await new Promise<void>((resolve) => server.listen(0, host, resolve))
  const { port } = server.address() as AddressInfo
  const shown = host.includes(':') ? `[${host}]` : host
  return {
    url: `http://${shown}:${port}`,
    port,
    received,
    connections: () => connections,
    async waitFor(count, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs
      while (received.length < count) {
        if (Date.now() > deadline) {
          throw new Error(`waited ${timeoutMs} ms for ${count} requests, got ${received.length}`)
        }
        await new Promise<void>((resolve) => {
          waiters.push(resolve)
          setTimeout(resolve, 50)
        })
      }
      return received
    },
    close() {
      for (const socket of sockets) socket.destroy()
      return new Promise((resolve) => server.close(() => resolve()))
    },
  }
}

/**
 * A self-signed certificate and its key for 127.0.0.1, made for these tests alone (valid until
 * 2126): a receiver no CA vouches for.
 */
const SELF_SIGNED_KEY = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgu1gxXy0HeRe3oT5w
q90nhlHxugPxinb1xmC/sFzA6GWhRANCAAT5MrkN4MWxCrsS2JCUMAIjVsisIPd2
1wliMKljmBthwwNHLuyMp0fHIjbK3piraGOpZyrFqtt/QlO6NsUBtlTm
-----END PRIVATE KEY-----`
const SELF_SIGNED_CERT = `-----BEGIN CERTIFICATE-----
MIIBkDCCATagAwIBAgIUFrrYrX8uu1BpIANZEDQyj/emztswCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJMTI3LjAuMC4xMCAXDTI2MTEzMDA4NTEzNFoYDzIxMjYxMTA2
MDg1MTM0WjAUMRIwEAYDVQQDDAkxMjcuMC4wLjEwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAAT5MrkN4MWxCrsS2JCUMAIjVsisIPd21wliMKljmBthwwNHLuyMp0fH
IjbK3piraGOpZyrFqtt/QlO6NsUBtlTmo2QwYjAdBgNVHQ4EFgQU0lACGIbT5AFL
wRe+/g5wIQgAsUgwHwYDVR0jBBgwFoAU0lACGIbT5AFLwRe+/g5wIQgAsUgwDwYD
VR0TAQH/BAUwAwEB/zAPBgNVHREECDAGhwR/AAABMAoGCCqGSM49BAMCA0gAMEUC
IHUfz12iW8gdiARLKqwqmHLE9izT/GJ9wNjl2jqCYz4dAiEA31kjsMLPyMa2LC2Q
S3d6dRGCKD2WZqVFaKnnktLbll4=
-----END CERTIFICATE-----`

/** An HTTPS receiver on 127.0.0.1 with a self-signed certificate; it answers 204. */
export async function startSelfSignedReceiver(): Promise<{ url: string; close(): Promise<void> }> {
  const server = createHttpsServer({ key: SELF_SIGNED_KEY, cert: SELF_SIGNED_CERT }, (_, res) =>
    res.writeHead(204).end(),
  )
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `https://127.0.0.1:${port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  }
}

/** A raw TCP server: `onConnection` does what it likes with each socket. */
export interface RawServer {
  readonly url: string
  readonly port: number
  /** Connections accepted, and those closed by either side, so far. */
  connections(): number
  closed(): number
  /** Bytes received on every connection, as latin1 text. */
  readonly data: string[]
  close(): Promise<void>
}

export async function startRawServer(onConnection: (socket: Socket) => void): Promise<RawServer> {
  let connections = 0
  let closed = 0
  const data: string[] = []
  const sockets = new Set<Socket>()
  const server = createNetServer((socket) => {
    const index = connections
    connections += 1
    data[index] = ''
    sockets.add(socket)
    socket.on('data', (chunk: Buffer) => {
      data[index] += chunk.toString('latin1')
    })
    socket.on('error', () => undefined)
    socket.on('close', () => {
      closed += 1
      sockets.delete(socket)
    })
    onConnection(socket)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    connections: () => connections,
    closed: () => closed,
    data,
    close() {
      for (const socket of sockets) socket.destroy()
      return new Promise((resolve) => server.close(() => resolve()))
    },
  }
}

/** Verifies a request as a receiver does with the Standard Webhooks reference library. */
export function verifyDelivery(secret: string, request: Received): unknown {
  return new Webhook(secret).verify(request.body.toString('utf8'), {
    'webhook-id': String(request.headers['webhook-id']),
    'webhook-timestamp': String(request.headers['webhook-timestamp']),
    'webhook-signature': String(request.headers['webhook-signature']),
  })
}

/** Waits until `check` holds, polling; throws after `timeoutMs`. */
export async function eventually(
  check: () => boolean | Promise<boolean>,
  timeoutMs = 5000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}
