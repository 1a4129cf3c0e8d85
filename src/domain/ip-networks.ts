/**
 * IP addresses as bytes and CIDR blocks over them: the arithmetic the webhook address policy
 * (webhooks/address-policy.ts) and its setting's parser share.
 */
import { isIP } from 'node:net'

/** A CIDR block: the address's bytes (4 or 16) and how many leading bits are fixed. */
export interface IpNetwork {
  readonly bytes: Uint8Array
  readonly prefix: number
}

/** The bytes of an IPv4 (4) or IPv6 (16) address in its textual form, or undefined. */
export function parseIp(text: string): Uint8Array | undefined {
  const version = isIP(text)
  if (version === 4) return Uint8Array.from(text.split('.').map(Number))
  if (version === 6) return ipv6Bytes(text)
  return undefined
}

function ipv6Bytes(text: string): Uint8Array {
  const zone = text.indexOf('%')
  let address = zone === -1 ? text : text.slice(0, zone)
  const lastColon = address.lastIndexOf(':')
  const tail = address.slice(lastColon + 1)
  if (tail.includes('.')) {
    const [a = 0, b = 0, c = 0, d = 0] = tail.split('.').map(Number)
    address = `${address.slice(0, lastColon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`
  }
  const [head = '', rest] = address.split('::')
  const groups = (part: string): number[] =>
    part === '' ? [] : part.split(':').map((group) => Number.parseInt(group, 16))
  const front = groups(head)
  const back = rest === undefined ? [] : groups(rest)
  const all = [...front, ...new Array<number>(8 - front.length - back.length).fill(0), ...back]
  return Uint8Array.from(all.flatMap((group) => [group >> 8, group & 0xff]))
}

/** `::ffff:a.b.c.d` (in any spelling) as the IPv4 address it stands for; others as given. */
export function unmappedIp(bytes: Uint8Array): Uint8Array {
  if (bytes.length !== 16) return bytes
  for (let i = 0; i < 10; i += 1) if (bytes[i] !== 0) return bytes
  return bytes[10] === 0xff && bytes[11] === 0xff ? bytes.slice(12) : bytes
}

/** `address/prefix`, or a lone address (the block of that one address); undefined if neither. */
export function parseNetwork(text: string): IpNetwork | undefined {
  const slash = text.indexOf('/')
  const written = parseIp(slash === -1 ? text : text.slice(0, slash))
  if (written === undefined) return undefined
  // `::ffff:127.0.0.0/104` is the IPv4 block 127.0.0.0/8 written as IPv6, as addresses are read.
  const bytes = unmappedIp(written)
  if (slash === -1) return { bytes, prefix: bytes.length * 8 }
  const from = bytes === written ? 0 : 96
  const bits = bytes.length * 8 + from
  const prefixText = text.slice(slash + 1)
  const prefix = Number(prefixText)
  if (!/^\d{1,3}$/.test(prefixText) || prefix < from || prefix > bits) return undefined
  return { bytes, prefix: prefix - from }
}

/** Whether an address (bytes of parseIp) lies in a block of the same family. */
export function inNetwork(address: Uint8Array, network: IpNetwork): boolean {
  if (address.length !== network.bytes.length) return false
  let left = network.prefix
  for (let i = 0; left > 0; i += 1, left -= 8) {
    const mask = left >= 8 ? 0xff : (0xff << (8 - left)) & 0xff
    if (((address[i] ?? 0) & mask) !== ((network.bytes[i] ?? 0) & mask)) return false
  }
  return true
}
