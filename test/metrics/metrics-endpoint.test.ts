import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { readFile } from 'node:fs/promises'
import path from 'node:path'
import { describe, it } from 'node:test'

import { createJsonLogger } from '../../src/log/logger.js'
import { parseConfig } from '../../src/process/config.js'
import { MemoryStore } from '../../src/store/memory-store.js'
import { sleep, startChild } from '../helpers/child.js'
import { assertProblem, request } from '../helpers/http.js'
import { makeTempDir, startService } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'
import { type MetricFamily, parseExposition, sampleValue } from './exposition.js'

type Families = Map<string, MetricFamily>

interface Scraper {
  /** Scrapes once the requests before it have settled (only the scrape itself in flight). */
  scrape(): Promise<Families>
  /** Scrapes so far: each one is counted under route="/metrics" by the next. */
  readonly count: number
}

function scraperFor(url: string): Scraper {
  let count = 0
  return {
    get count() {
      return count
    },
    async scrape() {
      for (let attempt = 0; ; attempt += 1) {
        const res = await request('GET', `${url}/metrics`)
        count += 1
        assert.equal(res.status, 200, res.text)
        assert.equal(res.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8')
        assert.equal(res.headers.get('cache-control'), 'no-store')
        const families = parseExposition(res.text)
        if (sampleValue(families, 'user_service_http_requests_in_flight') === 1) return families
        if (attempt > 200) throw new Error('requests stayed in flight')
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
    },
  }
}

const requests = (families: Families, route: string, method: string, status: number): number =>
  sampleValue(families, 'user_service_http_requests_total', {
    route,
    method,
    status: String(status),
  }) ?? 0

const durationCount = (families: Families, route: string): number =>
  sampleValue(families, 'user_service_http_request_duration_seconds_count', { route }) ?? 0

const value = (families: Families, name: string, labels: Record<string, string> = {}): number => {
  const found = sampleValue(families, name, labels)
  assert.notEqual(found, undefined, `no sample ${name} ${JSON.stringify(labels)}`)
  return found ?? Number.NaN
}

/** The families of CONTRACT §14 this service has (events and streams do not exist yet). */
const FAMILIES = {
  user_service_http_requests_total: 'counter',
  user_service_http_request_duration_seconds: 'histogram',
  user_service_http_requests_in_flight: 'gauge',
  user_service_users: 'gauge',
  user_service_store_write_seconds: 'histogram',
  user_service_store_fsync_seconds: 'histogram',
  user_service_event_loop_delay_seconds: 'gauge',
  user_service_log_lines_dropped_total: 'counter',
  user_service_token_cache_entries: 'gauge',
  user_service_token_cache_bytes: 'gauge',
  user_service_token_verifications_total: 'counter',
  process_cpu_seconds_total: 'counter',
  process_cpu_user_seconds_total: 'counter',
  process_cpu_system_seconds_total: 'counter',
  process_resident_memory_bytes: 'gauge',
  process_start_time_seconds: 'gauge',
  nodejs_heap_size_used_bytes: 'gauge',
  nodejs_heap_size_total_bytes: 'gauge',
  nodejs_external_memory_bytes: 'gauge',
}

describe('GET /metrics', () => {
  it('answers every family of §14 with HELP and TYPE, at the root and without a token', async (t) => {
    const svc = await startService(t, { basePath: '/v1' })
    const families = await scraperFor(svc.url).scrape()
    for (const [name, type] of Object.entries(FAMILIES)) {
      assert.equal(families.get(name)?.type, type, `family ${name}`)
      assert.notEqual(families.get(name)?.help, '', `HELP of ${name}`)
    }
    assert.ok(value(families, 'process_resident_memory_bytes') > 0)
    assert.ok(value(families, 'process_cpu_seconds_total') > 0)
    assert.ok(value(families, 'nodejs_heap_size_used_bytes') > 0)
    assert.ok(
      Math.abs(
        value(families, 'process_start_time_seconds') - (Date.now() / 1000 - process.uptime()),
      ) < 5,
    )
    for (const stat of ['p50', 'p99', 'max']) {
      assert.ok(value(families, 'user_service_event_loop_delay_seconds', { stat }) >= 0)
    }
    assertProblem(await request('GET', `${svc.url}/v1/metrics`), 404, 'not_found')
    const head = await request('HEAD', `${svc.url}/metrics`)
    assert.equal(head.status, 200)
    assert.equal(head.text, '')
  })

  it('counts requests by route template, method and status with exact deltas, and never by raw path', async (t) => {
    const svc = await startService(t)
    const user = await svc.createUser()
    const scraper = scraperFor(svc.url)
    const before = await scraper.scrape()
    const scrapesBefore = scraper.count
    for (let i = 0; i < 3; i += 1)
      assert.equal((await svc.call('GET', `/users/${user.id}`)).status, 200)
    assert.equal(
      (await request('HEAD', `${svc.url}/users/${user.id}`, { token: svc.token })).status,
      200,
    )
    assertProblem(
      await svc.call('GET', '/users/0190a5b2-3c4d-7e8f-9a0b-1c2d3e4f5a6b'),
      404,
      'not_found',
    )
    assertProblem(await svc.call('GET', `/users/${user.id}`, { token: 'not-a-token' }), 401)
    assertProblem(await svc.call('GET', '/no/such/path-with-"quotes"'), 404, 'not_found')
    assertProblem(await svc.call('DELETE', '/healthz'), 405, 'method_not_allowed')
    assertProblem(await svc.call('PROPFIND', '/users'), 405, 'method_not_allowed')
    assert.equal((await request('GET', `${svc.url}/healthz`)).status, 200)
    const after = await scraper.scrape()
    const delta = (route: string, method: string, status: number): number =>
      requests(after, route, method, status) - requests(before, route, method, status)
    assert.equal(delta('/users/{id}', 'GET', 200), 3)
    assert.equal(delta('/users/{id}', 'HEAD', 200), 1)
    assert.equal(delta('/users/{id}', 'GET', 404), 1)
    assert.equal(delta('/users/{id}', 'GET', 401), 1)
    assert.equal(delta('unmatched', 'GET', 404), 1)
    assert.equal(delta('unmatched', 'DELETE', 405), 1)
    assert.equal(delta('unmatched', 'other', 405), 1)
    assert.equal(delta('/healthz', 'GET', 200), 1)
    assert.equal(delta('/metrics', 'GET', 200), scraper.count - scrapesBefore)
    assert.equal(durationCount(after, '/users/{id}') - durationCount(before, '/users/{id}'), 6)
    assert.equal(durationCount(after, 'unmatched') - durationCount(before, 'unmatched'), 3)
    const routes = new Set(
      after
        .get('user_service_http_requests_total')
        ?.samples.map((sample) => sample.labels['route']),
    )
    assert.deepEqual(
      [...routes].filter((route) => route?.includes(user.id) || route?.includes('no/such')),
      [],
    )
    assert.equal(value(after, 'user_service_http_requests_in_flight'), 1)
  })

  it('counts a request whose client went away before the answer as status 499', async (t) => {
    let release: () => void = () => undefined
    const store = new MemoryStore()
    const get = store.get.bind(store)
    const held = new Promise<void>((resolve) => {
      release = resolve
    })
    store.get = async (id) => {
      await held
      return get(id)
    }
    const svc = await startService(t, { store })
    const scraper = scraperFor(svc.url)
    const before = await scraper.scrape()
    const controller = new AbortController()
    const pending = fetch(`${svc.url}/users/0190a5b2-3c4d-7e8f-9a0b-1c2d3e4f5a6b`, {
      headers: { authorization: `Bearer ${svc.token}` },
      signal: controller.signal,
    }).catch(() => undefined)
    await waitFor(
      async () => value(await rawScrape(svc.url), 'user_service_http_requests_in_flight') === 2,
    )
    controller.abort()
    await pending
    const after = await scraper.scrape()
    release()
    assert.equal(
      requests(after, '/users/{id}', 'GET', 499) - requests(before, '/users/{id}', 'GET', 499),
      1,
    )
  })

  it('shows users stored, store write and fsync timings, and the token cache', async (t) => {
    const svc = await startService(t)
    const scraper = scraperFor(svc.url)
    const before = await scraper.scrape()
    assert.equal(value(before, 'user_service_users'), 0)
    const token = makeToken({ sub: 'metrics-cache-test' })
    await svc.createUser()
    const created = await svc.call('POST', '/users', {
      token,
      json: { email: 'metrics@example.com', name: 'M' },
    })
    assert.equal(created.status, 201, created.text)
    assert.equal((await svc.call('GET', '/users', { token })).status, 200)
    const after = await scraper.scrape()
    assert.equal(value(after, 'user_service_users'), 2)
    const count = (families: Families, name: string, labels: Record<string, string> = {}): number =>
      value(families, `${name}_count`, labels)
    assert.equal(
      count(after, 'user_service_store_write_seconds') -
        count(before, 'user_service_store_write_seconds'),
      2,
    )
    const fsyncs = (families: Families, target: string): number =>
      count(families, 'user_service_store_fsync_seconds', { target }) -
      count(before, 'user_service_store_fsync_seconds', { target })
    // Each answer waited for the log's fdatasync (two creates one after the other: two), not for
    // an fsync of its file: the checkpoint (every second) syncs the files and the directory later.
    assert.equal(fsyncs(after, 'log'), 2)
    const feed = await svc.call('GET', '/events', { token: makeToken({ scope: 'events:read' }) })
    const newest = feed.json<{ items: { id: string }[] }>().items.at(-1)?.id
    assert.ok(newest !== undefined, feed.text)
    const checkpoint = path.join(svc.dataDir, 'checkpoint.json')
    let covered = false
    for (let i = 0; i < 100 && !covered; i += 1) {
      covered = (await readFile(checkpoint, 'utf8').catch(() => '')).includes(`"${newest}"`)
      if (!covered) await sleep(50)
    }
    assert.ok(covered, 'a checkpoint covered the second create')
    // One or two checkpoints (the two creates may straddle one): each synced its user files, then
    // users/, then wrote checkpoint.json (its own fsync) and synced the data directory. That last
    // sync ends after checkpoint.json is in place, so the scrape waits for it.
    let checkpointed = await scraper.scrape()
    const checkpoints = (): number => fsyncs(checkpointed, 'file') - 2
    for (let i = 0; i < 200 && fsyncs(checkpointed, 'directory') !== 2 * checkpoints(); i += 1) {
      await sleep(50)
      checkpointed = await scraper.scrape()
    }
    assert.ok(checkpoints() === 1 || checkpoints() === 2, `checkpoints: ${checkpoints()}`)
    assert.equal(fsyncs(checkpointed, 'directory'), 2 * checkpoints())
    assert.ok(value(after, 'user_service_store_write_seconds_sum') > 0)
    // Two new tokens were verified once each, and are held; the second use of `token` was a hit.
    assert.equal(
      value(after, 'user_service_token_verifications_total') -
        value(before, 'user_service_token_verifications_total'),
      2,
    )
    assert.equal(value(after, 'user_service_token_cache_entries'), 2)
    assert.ok(value(after, 'user_service_token_cache_bytes') >= token.length + svc.token.length)
  })

  it('counts log lines the logger dropped', async (t) => {
    const logger = createJsonLogger({
      write: () => {
        throw new Error('the reader is gone')
      },
    })
    const svc = await startService(t, { logger })
    const scraper = scraperFor(svc.url)
    const before = await scraper.scrape()
    const scrapesBefore = scraper.count
    for (let i = 0; i < 4; i += 1)
      assert.equal((await request('GET', `${svc.url}/healthz`)).status, 200)
    const after = await scraper.scrape()
    const dropped =
      value(after, 'user_service_log_lines_dropped_total') -
      value(before, 'user_service_log_lines_dropped_total')
    // One request line per request: the four probes and every scrape before the last.
    assert.equal(dropped, 4 + scraper.count - scrapesBefore)
    // The store's 'users loaded' line went the same way before the first scrape.
    assert.ok(value(before, 'user_service_log_lines_dropped_total') >= 1)
    assert.ok(logger.dropped > value(after, 'user_service_log_lines_dropped_total'))
  })

  it('answers 404 like any unknown path, for every method, and counts nothing with metrics off', async (t) => {
    const svc = await startService(t, { metrics: false })
    for (const method of ['GET', 'HEAD', 'POST']) {
      const res = await request(method, `${svc.url}/metrics`)
      assert.equal(res.status, 404, method)
      if (method !== 'HEAD') assertProblem(res, 404, 'not_found')
    }
    assert.equal((await request('GET', `${svc.url}/healthz`)).status, 200)
    const document = (await request('GET', `${svc.url}/openapi.json`)).json<{
      paths: Record<string, unknown>
    }>()
    assert.equal(
      document.paths['/metrics'],
      undefined,
      'the OpenAPI document does not list /metrics',
    )
    assert.ok(document.paths['/healthz'] !== undefined)
  })

  it('reads METRICS=on or off from the environment and refuses anything else by name', () => {
    assert.equal(parseConfig({}).metrics, true)
    assert.equal(parseConfig({ METRICS: 'off' }).metrics, false)
    assert.equal(parseConfig({ METRICS: 'OFF' }).metrics, false)
    assert.equal(parseConfig({ METRICS: 'on' }).metrics, true)
    assert.throws(
      () => parseConfig({ METRICS: 'false' }),
      /^ConfigError: METRICS must be on or off, got "false"$/,
    )
  })
})

describe('GET /metrics of the service process', () => {
  it('passes promtool check metrics on a real scrape (skipped when promtool is not installed)', async (t) => {
    if (spawnSync('promtool', ['--version'], { stdio: 'ignore' }).status !== 0) {
      t.skip(
        'promtool not installed (apt-get install -y prometheus): the exposition was checked by our parser only',
      )
      return
    }
    const child = await startChild({ dataDir: await makeTempDir(t) })
    t.after(() => child.stop())
    const res = await request('POST', `${child.url}/users`, {
      token: makeToken(),
      json: { email: 'p@example.com', name: 'P' },
    })
    assert.equal(res.status, 201, res.text)
    await request('GET', `${child.url}/missing`)
    const scrape = await request('GET', `${child.url}/metrics`)
    assert.equal(scrape.status, 200)
    parseExposition(scrape.text)
    const result = await promtool(scrape.text)
    assert.equal(result.code, 0, `promtool check metrics: ${result.output}`)
    assert.equal(result.output.trim(), '', 'promtool has lint remarks')
  })

  it('answers 404 with METRICS=off', async (t) => {
    const child = await startChild({ dataDir: await makeTempDir(t), env: { METRICS: 'off' } })
    t.after(() => child.stop())
    assertProblem(await request('GET', `${child.url}/metrics`), 404, 'not_found')
    assert.equal((await request('GET', `${child.url}/healthz`)).status, 200)
  })
})

async function rawScrape(url: string): Promise<Families> {
  return parseExposition((await request('GET', `${url}/metrics`)).text)
}

async function waitFor(check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('the condition never held')
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

function promtool(text: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const proc = spawn('promtool', ['check', 'metrics'], { stdio: ['pipe', 'pipe', 'pipe'] })
    let output = ''
    proc.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      output += chunk
    })
    proc.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      output += chunk
    })
    proc.on('error', reject)
    proc.on('close', (code) => {
      resolve({ code, output })
    })
    proc.stdin.end(text)
  })
}
