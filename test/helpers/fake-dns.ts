/**
 * A DNS server over UDP on 127.0.0.1 for the resolution tests: each question's answer is chosen by
 * the test (addresses, a name that does not exist, a server failure, or no answer at all), at once
 * or when a promise of it settles, and every question asked is recorded.
 */
import { createSocket, type RemoteInfo } from 'node:dgram'
import { isIPv4 } from 'node:net'

/** Addresses (A or AAAA, by their form), or how the server fails. */
export type DnsAnswer = readonly string[] | 'nxdomain' | 'servfail' | 'silent'

export interface FakeDns {
  /** `127.0.0.1:<port>`, as dns.setServers takes it. */
  readonly server: string
  /** Every question asked, as `<name> <A|AAAA>`. */
  readonly asked: string[]
  close(): Promise<void>
}

const TYPE_A = 1
const TYPE_AAAA = 28
const RCODE = { nxdomain: 3, servfail: 2 } as const

export async function startFakeDns(
  answer: (name: string) => DnsAnswer | Promise<DnsAnswer>,
): Promise<FakeDns> {
  const socket = createSocket('udp4')
  const asked: string[] = []
  socket.on('message', async (query: Buffer, from: RemoteInfo) => {
    const question = readQuestion(query)
    if (question === undefined) return
    const wanted = question.type === TYPE_A ? 'A' : question.type === TYPE_AAAA ? 'AAAA' : 'other'
    asked.push(`${question.name} ${wanted}`)
    const chosen = await answer(question.name)
    if (chosen === 'silent') return
    const records = typeof chosen === 'string' ? [] : answerRecords(question.type, chosen)
    const asking = query.subarray(12, question.end)
    const reply =
      typeof chosen === 'string'
        ? [header(query, RCODE[chosen], 0), asking]
        : [header(query, 0, records.length), asking, ...records]
    socket.send(Buffer.concat(reply), from.port, from.address)
  })
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve))
  return {
    server: `127.0.0.1:${socket.address().port}`,
    asked,
    close: () => new Promise((resolve) => socket.close(() => resolve())),
  }
}

interface Question {
  readonly name: string
  readonly type: number
  /** The offset just past the question (name, type, class). */
  readonly end: number
}

function readQuestion(query: Buffer): Question | undefined {
  const labels: string[] = []
  let offset = 12
  while (offset < query.length) {
    const length = query[offset] ?? 0
    offset += 1
    if (length === 0) break
    labels.push(query.toString('latin1', offset, offset + length))
    offset += length
  }
  if (offset + 4 > query.length) return undefined
  return { name: labels.join('.').toLowerCase(), type: query.readUInt16BE(offset), end: offset + 4 }
}

/** The reply's header: the query's id, a response with recursion, one question, `count` answers. */
function header(query: Buffer, rcode: number, count: number): Buffer {
  const head = Buffer.alloc(12)
  head.writeUInt16BE(query.readUInt16BE(0), 0)
  head.writeUInt16BE(0x8180 | rcode, 2)
  head.writeUInt16BE(1, 4)
  head.writeUInt16BE(count, 6)
  return head
}

/** One record per address of the type asked for (the others are left out: none is NODATA). */
function answerRecords(type: number, addresses: readonly string[]): Buffer[] {
  const matching = addresses.filter((address) => isIPv4(address) === (type === TYPE_A))
  return matching.map((address) => {
    const data = type === TYPE_A ? ipv4Bytes(address) : ipv6Bytes(address)
    const record = Buffer.alloc(12 + data.length)
    record.writeUInt16BE(0xc00c, 0) // the name: a pointer to the question's
    record.writeUInt16BE(type, 2)
    record.writeUInt16BE(1, 4) // IN
    record.writeUInt32BE(60, 6)
    record.writeUInt16BE(data.length, 10)
    data.copy(record, 12)
    return record
  })
}

function ipv4Bytes(address: string): Buffer {
  return Buffer.from(address.split('.').map(Number))
}

function ipv6Bytes(address: string): Buffer {
  const [head = '', tail = ''] = address.split('::')
  const left = head === '' ? [] : head.split(':')
  const right = tail === '' ? [] : tail.split(':')
  const groups = [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right]
  const bytes = Buffer.alloc(16)
  for (const [index, group] of groups.entries())
    bytes.writeUInt16BE(Number.parseInt(group, 16), index * 2)
  return bytes
}
