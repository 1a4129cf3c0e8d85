/**
 * Which addresses a webhook delivery may reach (docs/webhooks.md, addresses): global unicast
 * only, unless WEBHOOK_ALLOW_NETWORKS allows a block all the same. A client must not make the
 * service call what the service can reach and the client cannot.
 */
import {
  type IpNetwork,
  inNetwork,
  parseIp,
  parseNetwork,
  unmappedIp,
} from '../domain/ip-networks.js'
import { ConfigError } from '../settings.js'

/** The blocks WEBHOOK_ALLOW_NETWORKS allows, built once by createAllowList. */
export interface AllowList {
  readonly networks: readonly IpNetwork[]
}

/** No block allowed: every address that is not global unicast is refused. */
export const ALLOW_NONE: AllowList = { networks: [] }

/**
 * The allow list of WEBHOOK_ALLOW_NETWORKS's entries (CIDR blocks or lone addresses, IPv4 or
 * IPv6); ConfigError names an entry that is neither.
 */
export function createAllowList(entries: readonly string[]): AllowList {
  return {
    networks: entries.map((entry) => {
      const network = parseNetwork(entry)
      if (network === undefined) {
        throw new ConfigError(`WEBHOOK_ALLOW_NETWORKS: "${entry}" is not a CIDR block`)
      }
      return network
    }),
  }
}

function blocks(...entries: readonly string[]): readonly IpNetwork[] {
  return createAllowList(entries).networks
}

/**
 * The blocks that are not global unicast, built at the first address checked: parsing them
 * compiles Node's IPv6 expressions, a few ms that a start with no webhook does not need to pay.
 */
let refused: RefusedBlocks | undefined

interface RefusedBlocks {
  readonly v4: readonly IpNetwork[]
  /** 2000::/3: IPv6 outside it is refused. */
  readonly globalV6: readonly IpNetwork[]
  readonly v6: readonly IpNetwork[]
}

function refusedBlocks(): RefusedBlocks {
  refused ??= {
    // IPv4 blocks that are not global unicast (IANA's special-purpose registry, RFC 6890).
    v4: blocks(
      '0.0.0.0/8', // "this network", unspecified
      '10.0.0.0/8', // private
      '100.64.0.0/10', // shared (carrier-grade NAT)
      '127.0.0.0/8', // loopback
      '169.254.0.0/16', // link-local, the cloud metadata address included
      '172.16.0.0/12', // private
      '192.0.0.0/24', // IETF protocol assignments
      '192.0.2.0/24', // documentation
      '192.88.99.0/24', // 6to4 relay anycast
      '192.168.0.0/16', // private
      '198.18.0.0/15', // benchmarking
      '198.51.100.0/24', // documentation
      '203.0.113.0/24', // documentation
      '224.0.0.0/4', // multicast
      '240.0.0.0/4', // reserved, and the broadcast address
    ),
    // IPv6 outside 2000::/3 (loopback, unspecified, unique local, link-local, multicast, NAT64
    // and the rest) is not global unicast; inside it, these blocks are not either, or they embed
    // an IPv4 address that could be anything.
    globalV6: blocks('2000::/3'),
    v6: blocks(
      '2001::/23', // IETF protocol assignments: Teredo, benchmarking, ORCHID
      '2001:db8::/32', // documentation
      '2002::/16', // 6to4
      '3fff::/20', // documentation
    ),
  }
  return refused
}

/**
 * Whether a delivery may not go to this address: anything not a well-formed IP address, or one
 * that is not global unicast and not allowed. An IPv4-mapped IPv6 address is its IPv4 address.
 */
export function isRefusedAddress(ip: string, allow: AllowList): boolean {
  const parsed = parseIp(ip)
  if (parsed === undefined) return true
  const bytes = unmappedIp(parsed)
  if (allow.networks.some((network) => inNetwork(bytes, network))) return false
  const { v4, globalV6, v6 } = refusedBlocks()
  if (bytes.length === 4) return v4.some((network) => inNetwork(bytes, network))
  return (
    // Stryker disable next-line MethodExpression: 2000::/3 is one block, in which some and every agree
    !globalV6.some((network) => inNetwork(bytes, network)) ||
    v6.some((network) => inNetwork(bytes, network))
  )
}

const LOOPBACK = ['127.0.0.1', '::1']

/**
 * Whether a URL's host is refused when an endpoint is registered or changed: an address literal
 * (the URL parser has already turned `127.1`, `2130706433` or `0x7f.0.0.1` into a dotted quad)
 * that isRefusedAddress refuses, or `localhost` or a name under `.localhost` (RFC 6761) while no
 * loopback address is allowed. Other names are checked when an attempt resolves them.
 */
export function refusedUrlHost(url: URL, allow: AllowList): boolean {
  const host = url.hostname.toLowerCase().replace(/\.+$/, '')
  // The URL parser allows '[' in a host only to open an IPv6 literal, closed by the last ']'.
  if (host.startsWith('[')) return isRefusedAddress(host.slice(1, -1), allow)
  if (parseIp(host) !== undefined) return isRefusedAddress(host, allow)
  if (host === 'localhost' || host.endsWith('.localhost')) {
    return LOOPBACK.every((address) => isRefusedAddress(address, allow))
  }
  return false
}
