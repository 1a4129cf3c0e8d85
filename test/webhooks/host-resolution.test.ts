import assert from 'node:assert/strict'
import { setServers } from 'node:dns'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import { resolveHost } from '../../src/webhooks/host-resolution.js'
import { type RunningChild, sleep, startChild } from '../helpers/child.js'
import { helperScript, serviceScript } from '../helpers/child-scripts.js'
import { type DnsAnswer, type FakeDns, startFakeDns } from '../helpers/fake-dns.js'
import { request } from '../helpers/http.js'
import { compileShim, DNS_SHIM_SOURCE } from '../helpers/syscall-shim.js'
import { makeToken } from '../helpers/tokens.js'
import { ADMIN } from '../helpers/webhook-api.js'
import { eventually, startReceiver } from '../helpers/webhook-receivers.js'

async function dnsFor(
  t: TestContext,
  answer: (name: string) => DnsAnswer | Promise<DnsAnswer>,
): Promise<FakeDns> {
  const dns = await startFakeDns(answer)
  t.after(() => dns.close())
  setServers([dns.server])
  return dns
}

const never = new AbortController().signal

/** No search domains, whatever the machine's resolv.conf says: the names asked are the test's. */
const NO_SEARCH = path.join(tmpdir(), 'no-such-dir-for-host-resolution', 'resolv.conf')

/** A resolv.conf of the test's own. */
function resolvConf(t: TestContext, text: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'resolv-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const file = path.join(dir, 'resolv.conf')
  writeFileSync(file, text)
  return file
}

async function codeOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise
  } catch (error) {
    // An abort's DOMException has a legacy numeric code: its name says it.
    if (error instanceof Error && error.name === 'AbortError') return error.name
    return String((error as { code?: unknown }).code)
  }
  assert.fail('the resolution did not fail')
}

describe('resolving a webhook host', () => {
  it('takes the DNS servers’ addresses, IPv4 before IPv6', async (t) => {
    const dns = await dnsFor(t, () => ['2001:db8::7', '192.0.2.7', '192.0.2.8'])
    assert.deepEqual(await resolveHost('hooks.example.test', never, NO_SEARCH), [
      { address: '192.0.2.7', family: 4 },
      { address: '192.0.2.8', family: 4 },
      { address: '2001:db8::7', family: 6 },
    ])
    assert.deepEqual(dns.asked.sort(), ['hooks.example.test A', 'hooks.example.test AAAA'])
  })

  it('takes one family when the servers have only that one', async (t) => {
    await dnsFor(t, () => ['2001:db8::9'])
    assert.deepEqual(await resolveHost('six.example.test', never, NO_SEARCH), [
      { address: '2001:db8::9', family: 6 },
    ])
  })

  it('asks the system resolver for a name the servers say does not exist (/etc/hosts)', async (t) => {
    const dns = await dnsFor(t, () => 'nxdomain')
    const addresses = await resolveHost('localhost', never, NO_SEARCH)
    assert.ok(
      addresses.some((entry) => entry.address === '127.0.0.1'),
      JSON.stringify(addresses),
    )
    assert.deepEqual(dns.asked.sort(), ['localhost A', 'localhost AAAA'])
  })

  it('asks the system resolver when no DNS server is set', async (t) => {
    setServers([])
    t.after(() => setServers(['127.0.0.1']))
    const addresses = await resolveHost('localhost', never, NO_SEARCH)
    assert.ok(
      addresses.some((entry) => entry.address === '127.0.0.1'),
      JSON.stringify(addresses),
    )
  })

  it('fails at once on a server failure, without asking the system resolver', async (t) => {
    await dnsFor(t, () => 'servfail')
    // The system resolver asks the machine's own servers: it would fail otherwise, or find it.
    assert.equal(await codeOf(resolveHost('localhost', never, NO_SEARCH)), 'ESERVFAIL')
  })

  it('gives up on servers that never answer after its own tries', async (t) => {
    const dns = await dnsFor(t, () => 'silent')
    assert.equal(await codeOf(resolveHost('localhost', never, NO_SEARCH)), 'ETIMEOUT')
    // Two tries of each question: no more.
    assert.equal(dns.asked.filter((line) => line === 'localhost A').length, 2)
  })

  it('tries the search domains as the system resolver would (Kubernetes: ndots:5)', async (t) => {
    // receiver.team is a name in the team namespace, and could be a public name too (.team is a
    // top-level domain): the system resolver finds the cluster's service first, so must this.
    const dns = await dnsFor(t, (name) => {
      if (name === 'receiver.team.team.svc.cluster.local') return ['10.96.0.15']
      if (name === 'receiver.team' || name === 'x.receiver.team') return ['93.184.215.14']
      return 'nxdomain'
    })
    const conf = resolvConf(t, 'search team.svc.cluster.local svc.cluster.local\noptions ndots:5\n')
    assert.deepEqual(await resolveHost('receiver.team', never, conf), [
      { address: '10.96.0.15', family: 4 },
    ])
    // A name ending with a dot is asked only as it is.
    const asked = dns.asked.length
    assert.equal((await resolveHost('x.receiver.team.', never, conf)).length, 1)
    assert.deepEqual(dns.asked.slice(asked).sort(), ['x.receiver.team A', 'x.receiver.team AAAA'])
  })

  it('asks a name with ndots dots or more as it is first', async (t) => {
    const dns = await dnsFor(t, (name) =>
      name === 'hooks.example.test' ? ['192.0.2.7'] : 'nxdomain',
    )
    const conf = resolvConf(t, 'domain corp.example\n')
    assert.deepEqual(await resolveHost('hooks.example.test', never, conf), [
      { address: '192.0.2.7', family: 4 },
    ])
    assert.deepEqual(dns.asked.sort(), ['hooks.example.test A', 'hooks.example.test AAAA'])
  })

  it('stops when its attempt ends, and never hands a cancelled query to the system resolver', async (t) => {
    const dns = await dnsFor(t, () => 'silent')
    const ended = new AbortController()
    const resolving = resolveHost('localhost', ended.signal, NO_SEARCH)
    await eventually(() => dns.asked.length === 2)
    const started = Date.now()
    ended.abort()
    assert.equal(await codeOf(resolving), 'AbortError')
    assert.ok(Date.now() - started < 1000)
    await sleep(300)
    assert.equal(dns.asked.length, 2)
  })

  it('asks again the questions of other attempts when one attempt’s end cancels them', async (t) => {
    let answer = (): void => {}
    const held = new Promise<void>((resolve) => {
      answer = resolve
    })
    const dns = await dnsFor(t, async (name) => {
      if (name !== 'slow.example.test') return 'silent'
      await held
      return ['192.0.2.5']
    })
    const ended = new AbortController()
    const silent = resolveHost('silent.example.test', ended.signal, NO_SEARCH)
    const slow = resolveHost('slow.example.test', never, NO_SEARCH)
    await eventually(() => dns.asked.length === 4)
    ended.abort()
    assert.equal(await codeOf(silent), 'AbortError')
    await eventually(() => dns.asked.filter((line) => line.startsWith('slow.')).length === 4)
    answer()
    assert.deepEqual(await slow, [{ address: '192.0.2.5', family: 4 }])
  })
})

/**
 * The service in a child whose system resolver never answers for `*.hang.test` (the shim: 30 s,
 * then a failure, unless `env` says otherwise) and whose DNS server is the test's own.
 */
async function startResolvingService(
  t: TestContext,
  dns: FakeDns,
  library: string,
  env: Record<string, string> = {},
): Promise<{ child: RunningChild; shimLog: string }> {
  const dir = mkdtempSync(path.join(tmpdir(), 'host-resolution-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const shimLog = path.join(dir, 'getaddrinfo.log')
  const child = await startChild({
    dataDir: path.join(dir, 'data'),
    args: ['--import', helperScript('dns-preload'), serviceScript()],
    env: {
      LD_PRELOAD: library,
      DNS_SHIM_LOG: shimLog,
      TEST_DNS_SERVER: dns.server,
      WEBHOOK_ALLOW_NETWORKS: '127.0.0.0/8',
      WEBHOOK_TIMEOUT_MS: '3000',
      ...env,
    },
  })
  t.after(() => child.stop('SIGKILL'))
  return { child, shimLog }
}

const WRITER = makeToken()

async function post(child: RunningChild, target: string, token: string, json: unknown) {
  const res = await request('POST', `${child.url}${target}`, { token, json })
  assert.equal(res.status, 201, res.text)
  return res
}

/**
 * The fake DNS of the child's tests: `answer` for `*.hang.test`, 127.0.0.1 for `*.ok.test`, and
 * no such name for the rest (the machine's search domains, which the child tries first).
 */
function answerHanging(name: string, answer: DnsAnswer): DnsAnswer {
  if (name.endsWith('.hang.test')) return answer
  return name.endsWith('.ok.test') ? ['127.0.0.1'] : 'nxdomain'
}

/** Three endpoints at two names that never resolve, each with an event to deliver. */
async function hangEndpoints(child: RunningChild, port: number): Promise<void> {
  for (const name of ['one', 'one', 'two'])
    await post(child, '/webhooks', ADMIN, { url: `http://${name}.hang.test:${port}/` })
  await post(child, '/users', WRITER, { email: `${Date.now()}@example.com`, name: 'First' })
}

/** Whether `name` was asked of the DNS server or of the system resolver. */
function askedFor(dns: FakeDns, shimLog: string, name: string): boolean {
  if (dns.asked.some((line) => line.startsWith(`${name} `))) return true
  return systemCalls(shimLog).includes(name)
}

/** The names the system resolver was asked for, in order. */
function systemCalls(shimLog: string): string[] {
  try {
    return readFileSync(shimLog, 'utf8')
      .split('\n')
      .filter((line) => line !== '')
  } catch {
    return []
  }
}

/** Asks the child to resolve a name of its own; the milliseconds it took. */
async function probe(child: RunningChild): Promise<number> {
  const before = child.stderr().length
  child.proc.kill('SIGUSR2')
  let line: RegExpExecArray | null = null
  await eventually(() => {
    line = /probe (\S+) (\d+)/.exec(child.stderr().slice(before))
    return line !== null
  }, 20_000)
  const [, outcome, ms] = line ?? []
  assert.equal(outcome, 'resolved')
  return Number(ms)
}

describe('a webhook receiver whose DNS never answers', () => {
  const shim = compileShim(DNS_SHIM_SOURCE)

  for (const [kind, answer] of [
    ['never answer', 'silent'],
    ['say the names do not exist (the system resolver is asked)', 'nxdomain'],
  ] as const) {
    it(`delays neither another endpoint nor the process's own lookups when the servers ${kind}`, {
      skip: shim.skip,
    }, async (t) => {
      const dns = await dnsFor(t, (name) => answerHanging(name, answer))
      const receiver = await startReceiver()
      t.after(() => receiver.close())
      const { child, shimLog } = await startResolvingService(t, dns, shim.library ?? '')
      await hangEndpoints(child, receiver.port)
      await eventually(() => askedFor(dns, shimLog, 'two.hang.test'))
      await sleep(200)
      await post(child, '/webhooks', ADMIN, { url: `http://fine.ok.test:${receiver.port}/` })
      const started = Date.now()
      await post(child, '/users', WRITER, { email: `${Date.now()}@example.com`, name: 'Second' })
      await receiver.waitFor(1)
      assert.ok(Date.now() - started < 2000, `delivered after ${Date.now() - started} ms`)
      assert.ok((await probe(child)) < 1000)
      const called = readFileSync(shimLog, 'utf8')
        .split('\n')
        .filter((line) => line !== '')
      const hanging = called.filter((name) => name.endsWith('.hang.test'))
      // The system resolver holds one thread at most: the name that reached it first holds it (the
      // three endpoints' attempts start together, in no set order), the other name waits for it,
      // and a second endpoint at the same name waits for its resolution rather than asking again.
      if (answer === 'silent') assert.deepEqual(hanging, [])
      else {
        assert.equal(hanging.length, 1, `the system resolver was asked for ${hanging.join(', ')}`)
        assert.match(hanging[0] ?? '', /^(one|two)\.hang\.test$/)
      }
    })
  }

  it('asks the system resolver once for a name however many attempts wait for it', {
    skip: shim.skip,
  }, async (t) => {
    const dns = await dnsFor(t, (name) => (name.endsWith('.hang.test') ? 'nxdomain' : []))
    // Each lookup takes 2 s and each attempt waits 6 s: a second lookup of the first name would
    // run before the second name's.
    const { child, shimLog } = await startResolvingService(t, dns, shim.library ?? '', {
      DNS_SHIM_HANG_S: '2',
      WEBHOOK_TIMEOUT_MS: '6000',
    })
    await hangEndpoints(child, 9)
    await eventually(() => systemCalls(shimLog).includes('two.hang.test'), 15_000)
    assert.deepEqual(systemCalls(shimLog).slice(0, 2), ['one.hang.test', 'two.hang.test'])
  })

  it('leaves nothing running that would hold up the stop', { skip: shim.skip }, async (t) => {
    const dns = await dnsFor(t, (name) => answerHanging(name, 'silent'))
    const receiver = await startReceiver()
    t.after(() => receiver.close())
    const { child, shimLog } = await startResolvingService(t, dns, shim.library ?? '')
    await hangEndpoints(child, receiver.port)
    await eventually(() => askedFor(dns, shimLog, 'two.hang.test'))
    const started = Date.now()
    const exit = await child.stop('SIGTERM')
    assert.equal(exit.code, 0)
    assert.ok(Date.now() - started < 5000, `exited after ${Date.now() - started} ms`)
  })
})
