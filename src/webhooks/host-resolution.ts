/**
 * How a webhook attempt resolves its endpoint's host, so that a receiver whose DNS never answers
 * cannot hold up the others or the process.
 *
 * The system resolver (`dns.lookup`, getaddrinfo) runs on libuv's thread pool, which lets at most
 * two resolutions run at once for the whole process and cannot cancel one: two endpoints at names
 * that never resolve would hold both threads for the resolver's own time-outs (tens of seconds),
 * every other endpoint's attempt and every other lookup of the process (the database driver's
 * reconnection, an embedding program's own requests) would queue behind them, and the process
 * could not exit before they returned. So a name is first asked of the DNS servers directly
 * (c-ares: its own time-out, no thread, cancelled when the attempt ends), with the search domains
 * in the system resolver's order (search-names.ts), so that it finds the same host. Only a name
 * they say does not exist, or a machine with no DNS server to ask, goes to the system resolver,
 * which knows `/etc/hosts`; those resolutions run one at a time for the whole process, one per
 * name however many attempts wait for it, so that the thread pool always keeps a thread for
 * everything else.
 */
import dns, { type LookupAddress } from 'node:dns'
import { Resolver } from 'node:dns/promises'

import { namesToAsk, RESOLV_CONF } from './search-names.js'

/** c-ares's time-out for one try, and its tries (each later try waits twice as long). */
const TRY_TIMEOUT_MS = 2000
const TRIES = 2

/** The DNS servers' answers that say the name is not theirs: the system resolver may know it. */
const NOT_IN_DNS = new Set(['ENOTFOUND', 'ENODATA', 'ECONNREFUSED', 'EREFUSED'])

/**
 * The addresses of `host`, IPv4 before IPv6. Rejects when no address is found, or when `signal`
 * aborts (the attempt ended: its resolution is cancelled or, on the system resolver, left to end
 * unheard). `resolvConf` holds the search domains (a test's own file).
 */
export async function resolveHost(
  host: string,
  signal: AbortSignal,
  resolvConf = RESOLV_CONF,
): Promise<LookupAddress[]> {
  // Read at each resolution: an embedding program's dns.setServers() is followed. (Through the
  // module object: setServers() replaces its functions, and a named import keeps the first ones.)
  const servers = dns.getServers()
  if (servers.length > 0) {
    const names = await namesToAsk(host, resolvConf)
    signal.throwIfAborted()
    const answer = await askDnsServers(names, servers, signal)
    if (answer !== undefined) return answer
  }
  signal.throwIfAborted()
  return systemLookup(host, signal)
}

/**
 * The resolver the questions go to, shared (a new one per attempt cost about 90 µs of the main
 * thread: c-ares reads its configuration files as it starts), and replaced when the servers change
 * or when it was cancelled.
 */
let shared: { readonly resolver: Resolver; readonly servers: string } | undefined
const cancelled = new WeakSet<Resolver>()

function sharedResolver(servers: string[]): Resolver {
  const key = servers.join(',')
  if (shared === undefined || shared.servers !== key) {
    const resolver = new Resolver({ timeout: TRY_TIMEOUT_MS, tries: TRIES })
    resolver.setServers(servers)
    shared = { resolver, servers: key }
  }
  return shared.resolver
}

/**
 * The servers' addresses for the first of `names` they know (the host with the search domains,
 * in the system resolver's order), or undefined when they know none of them.
 */
async function askDnsServers(
  names: readonly string[],
  servers: string[],
  signal: AbortSignal,
): Promise<LookupAddress[] | undefined> {
  for (const name of names) {
    const addresses = await askOne(name, servers, signal)
    if (addresses !== undefined) return addresses
  }
  return undefined
}

async function askOne(
  name: string,
  servers: string[],
  signal: AbortSignal,
): Promise<LookupAddress[] | undefined> {
  const resolver = sharedResolver(servers)
  // c-ares cancels every question of a resolver at once: an attempt that ends while its question
  // is unanswered retires the shared resolver, and the others' questions are asked again.
  const cancel = (): void => {
    if (shared?.resolver === resolver) shared = undefined
    cancelled.add(resolver)
    resolver.cancel()
  }
  signal.addEventListener('abort', cancel, { once: true })
  const [v4, v6] = await Promise.allSettled([resolver.resolve4(name), resolver.resolve6(name)])
  signal.removeEventListener('abort', cancel)
  // A cancelled question's failure says nothing of the name (Node's callback form even reports it
  // as ENOTFOUND): it must not pass for an unknown one.
  signal.throwIfAborted()
  if (cancelled.has(resolver)) return askOne(name, servers, signal)
  const addresses: LookupAddress[] = []
  if (v4.status === 'fulfilled')
    for (const address of v4.value) addresses.push({ address, family: 4 })
  if (v6.status === 'fulfilled')
    for (const address of v6.value) addresses.push({ address, family: 6 })
  if (addresses.length > 0) return addresses
  const failures = [v4, v6].flatMap((result) =>
    result.status === 'rejected' ? [result.reason] : [],
  )
  const broken = failures.find((reason: unknown) => !NOT_IN_DNS.has(codeOf(reason)))
  // A time-out or a server failure says the name's DNS is broken: the system resolver would ask
  // the same servers and wait as long, on a thread.
  if (broken !== undefined) throw broken
  return undefined
}

function codeOf(reason: unknown): string {
  if (typeof reason !== 'object' || reason === null || !('code' in reason)) return ''
  return String(reason.code)
}

type Settle = (error: Error | null, addresses: LookupAddress[]) => void

/** One name for the system resolver and the attempts waiting for it. */
interface SystemQuery {
  readonly host: string
  readonly waiting: Set<Settle>
}

const queued: SystemQuery[] = []
const byHost = new Map<string, SystemQuery>()
let running = false

function systemLookup(host: string, signal: AbortSignal): Promise<LookupAddress[]> {
  return new Promise((resolve, reject) => {
    let query = byHost.get(host)
    if (query === undefined) {
      query = { host, waiting: new Set() }
      byHost.set(host, query)
      queued.push(query)
    }
    const waiting = query.waiting
    const leave = (): void => {
      waiting.delete(settle)
      reject(signal.reason)
    }
    const settle: Settle = (error, addresses) => {
      signal.removeEventListener('abort', leave)
      if (error === null) resolve(addresses)
      else reject(error)
    }
    waiting.add(settle)
    signal.addEventListener('abort', leave, { once: true })
    startNext()
  })
}

function startNext(): void {
  if (running) return
  let query = queued.shift()
  // A name whose attempts all ended while it waited is not resolved.
  while (query !== undefined && query.waiting.size === 0) {
    byHost.delete(query.host)
    query = queued.shift()
  }
  if (query === undefined) return
  running = true
  const { host, waiting } = query
  // verbatim: the resolver's order, so that the choice does not depend on Node's sorting.
  dns.lookup(host, { all: true, verbatim: true }, (error, addresses) => {
    running = false
    byHost.delete(host)
    for (const settle of waiting) settle(error, addresses)
    startNext()
  })
}
