/**
 * The names the system's resolver (getaddrinfo) would ask the DNS servers for a host, in its
 * order, so that the servers asked directly (host-resolution.ts) find what it would find. In
 * Kubernetes (`search <namespace>.svc.cluster.local …`, `ndots:5`), `receiver.team` is the
 * service `receiver` of the namespace `team`; asked as it is, it is a public name under the
 * top-level domain `.team`, anyone's host, which would get the events and their signatures.
 */
import { readFile } from 'node:fs/promises'

export const RESOLV_CONF = '/etc/resolv.conf'

/** The longest name DNS carries (RFC 1035, written without its final dot). */
const MAX_NAME_LENGTH = 253
/** The most `ndots` the resolver takes (resolv.conf(5)). */
const MAX_NDOTS = 15

/**
 * `host` with the search domains, as resolv.conf(5) says: a name ending with a dot is asked as it
 * is, only; one with `ndots` dots or more as it is first, then with each domain; any other with
 * each domain first. An unreadable file has no search domains.
 */
export async function namesToAsk(host: string, resolvConf = RESOLV_CONF): Promise<string[]> {
  if (host.endsWith('.')) return [host]
  let text = ''
  try {
    text = await readFile(resolvConf, 'utf8')
  } catch {
    // No file (or none we may read): the name as it is, as getaddrinfo would.
  }
  const { search, ndots } = parseResolvConf(text)
  const searched = search
    .map((domain) => `${host}.${domain}`)
    .filter((name) => name.length <= MAX_NAME_LENGTH)
  const dots = host.split('.').length - 1
  return dots >= ndots ? [host, ...searched] : [...searched, host]
}

/** The search domains and `ndots` of a resolv.conf: `search` and `domain` replace each other. */
export function parseResolvConf(text: string): { search: string[]; ndots: number } {
  let search: string[] = []
  let ndots = 1
  for (const line of text.split('\n')) {
    const [keyword, ...values] = line.trim().split(/\s+/)
    if (keyword === 'search') search = values
    else if (keyword === 'domain') search = values.slice(0, 1)
    else if (keyword === 'options') {
      for (const option of values) {
        const found = /^ndots:(\d+)$/.exec(option)
        if (found !== null) ndots = Math.min(Number(found[1]), MAX_NDOTS)
      }
    }
  }
  // `search .` (the root) adds nothing to a name.
  search = search.map((domain) => domain.replace(/\.+$/, '')).filter((domain) => domain !== '')
  return { search, ndots }
}
