/**
 * The client address a request counts against (docs/operations.md, rate limits): the
 * connection's peer, or, when the peer is a trusted proxy, the right-most `X-Forwarded-For`
 * address that is not itself a trusted proxy. An IPv6 address stands for its /64 (one host's
 * share), an IPv4-mapped one for its IPv4 address.
 */
import type { IncomingMessage } from 'node:http'
import { BlockList, isIP } from 'node:net'

/** A TRUSTED_PROXIES entry that is neither an address nor a CIDR block. */
export class TrustedProxyError extends Error {
  override name = 'TrustedProxyError'
}

/** `TRUSTED_PROXIES`: a comma list of addresses and CIDR blocks, IPv4 or IPv6. */
export function parseTrustedProxies(text: string): readonly string[] {
  const entries = text
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part !== '')
  for (const entry of entries) toBlock(entry)
  return entries
}

interface Block {
  readonly address: string
  readonly prefix: number
  readonly family: 'ipv4' | 'ipv6'
}

function toBlock(entry: string): Block {
  const slash = entry.indexOf('/')
  const written = slash === -1 ? entry : entry.slice(0, slash)
  const address = unmapped(written)
  const version = isIP(address)
  if (version === 0) {
    throw new TrustedProxyError(`"${entry}" is not an IP address or a CIDR block`)
  }
  // `::ffff:10.0.0.0/104` is the IPv4 block 10.0.0.0/8 written as IPv6: its prefix counts 96 more.
  const from = address === written ? 0 : 96
  const bits = (version === 4 ? 32 : 128) + from
  const prefixText = slash === -1 ? String(bits) : entry.slice(slash + 1)
  const prefix = Number(prefixText)
  if (!/^\d{1,3}$/.test(prefixText) || prefix < from || prefix > bits) {
    throw new TrustedProxyError(`"${entry}": the prefix length must be ${from} to ${bits}`)
  }
  return { address, prefix: prefix - from, family: version === 4 ? 'ipv4' : 'ipv6' }
}

/** Reads a request's client address as a partition key; the list is parseTrustedProxies's. */
export type ClientAddress = (req: IncomingMessage) => string

export function createClientAddress(trusted: readonly string[]): ClientAddress {
  if (trusted.length === 0) return (req) => addressKey(unmapped(req.socket.remoteAddress ?? ''))
  const list = new BlockList()
  for (const entry of trusted) {
    const block = toBlock(entry)
    list.addSubnet(block.address, block.prefix, block.family)
  }
  // check() answers false for what is not an address of the family given.
  const isTrusted = (address: string): boolean =>
    list.check(address, isIP(address) === 4 ? 'ipv4' : 'ipv6')
  return (req) => {
    const peer = unmapped(req.socket.remoteAddress ?? '')
    if (!isTrusted(peer)) return addressKey(peer)
    const forwarded = req.headers['x-forwarded-for']
    if (forwarded === undefined) return addressKey(peer)
    const hops = (typeof forwarded === 'string' ? forwarded : forwarded.join(',')).split(',')
    for (const entry of hops.reverse()) {
      const hop = unmapped(stripHop(entry))
      // Not an address (a proxy's "unknown"): passed over, as it names no client.
      if (isIP(hop) === 0) continue
      if (!isTrusted(hop)) return addressKey(hop)
    }
    return addressKey(peer)
  }
}

/** An X-Forwarded-For entry without spaces, brackets or an IPv4 port. */
function stripHop(hop: string): string {
  const value = hop.trim()
  if (value.startsWith('[')) {
    const end = value.indexOf(']')
    return end === -1 ? value : value.slice(1, end)
  }
  const colon = value.indexOf(':')
  if (colon !== -1 && colon === value.lastIndexOf(':')) return value.slice(0, colon)
  return value
}

/**
 * An IPv4-mapped IPv6 address is its IPv4 address, however it is written: `::ffff:192.0.2.1`
 * (Node's own form for a peer), `::ffff:c000:201`, `0:0:0:0:0:ffff:192.0.2.1`.
 */
export function unmapped(address: string): string {
  // A fast path for Node's own form, the peer of every IPv4 client on a dual-stack listener: the
  // general one below takes some 40 times longer for the same answer.
  // Stryker disable next-line MethodExpression,StringLiteral,BlockStatement: the fast path missed, the general path answers the same
  if (address.length > 7 && address.slice(0, 7).toLowerCase() === '::ffff:') {
    // Stryker disable next-line MethodExpression: as above
    const tail = address.slice(7)
    if (isIP(tail) === 4) return tail
  }
  // Stryker disable next-line ConditionalExpression,StringLiteral,UnaryOperator: a fast path for IPv4, which the general one answers alike
  if (address.indexOf(':') === -1) return address
  const groups = ipv6Groups(address)
  if (groups === undefined || groups[5] !== 0xffff || groups.slice(0, 5).some((g) => g !== 0))
    return address
  const [high = 0, low = 0] = groups.slice(6)
  return `${high >> 8}.${high & 0xff}.${low >> 8}.${low & 0xff}`
}

/** The key of an address: IPv4 as is, IPv6 as its first 64 bits; anything else as given. */
export function addressKey(address: string): string {
  // Counted on every request: IPv4 costs an indexOf here, not the IPv6 parse's isIP and slices.
  // Stryker disable next-line ConditionalExpression,StringLiteral,UnaryOperator: the general path answers alike
  if (address.indexOf(':') === -1) return address
  const groups = ipv6Groups(address)
  if (groups === undefined) return address
  return `${groups
    .slice(0, 4)
    .map((group) => group.toString(16))
    .join(':')}::/64`
}

/** The eight 16-bit groups of an IPv6 address (a zone and a dotted IPv4 tail allowed). */
export function ipv6Groups(address: string): number[] | undefined {
  const zone = address.indexOf('%')
  let text = zone === -1 ? address : address.slice(0, zone)
  if (isIP(text) !== 6) return undefined
  const lastColon = text.lastIndexOf(':')
  const tail = text.slice(lastColon + 1)
  if (tail.includes('.')) {
    const [a = 0, b = 0, c = 0, d = 0] = tail.split('.').map(Number)
    text = `${text.slice(0, lastColon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`
  }
  const [head = '', rest] = text.split('::')
  const parse = (part: string): number[] =>
    part === '' ? [] : part.split(':').map((group) => Number.parseInt(group, 16))
  const front = parse(head)
  if (rest === undefined) return front
  const back = parse(rest)
  return [...front, ...new Array<number>(8 - front.length - back.length).fill(0), ...back]
}
