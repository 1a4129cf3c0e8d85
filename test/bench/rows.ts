// The bench's verdicts: issue 30's rows in its order, then the project's earlier figures, each a
// measured figure beside its reference with the goal and whether it was met.
import { type LiveResult, quantile } from './live-events.js'
import { emptyRow, fmt, judge, markdownTable, type Row } from './report.js'
import {
  type CaseResult,
  type ImportResult,
  type LiveCaseResult,
  median,
  NOT_SELECTED,
  type Outcome,
  type StartResult,
  type StartSample,
  type WebhookLagResult,
} from './results-types.js'
import { webhookLagRows } from './webhook-rows.js'

export { NOT_SELECTED }

/** Users of the large cases (start-up, the 100k list and POST). */
const LARGE = 100_000

export interface BenchResults {
  getById: Outcome<CaseResult>
  /** GET /users/{id} with rate limits on; its reference is the same service with them off. */
  getByIdLimited: Outcome<CaseResult>
  /** POST /users with a key of its own on each request; its reference, the same POST without. */
  postKeyed: Outcome<CaseResult>
  /** POST /users with one webhook endpoint that answers at once; its reference, with none. */
  postWebhook: Outcome<CaseResult>
  webhookLag: Outcome<WebhookLagResult>
  /** Writes per second of the webhook lag case. */
  webhookLagRate: number
  post1k: Outcome<CaseResult>
  post100k: Outcome<CaseResult>
  /** POST /users at 1k users with every fsync and fdatasync slowed to `slowSyncMs` (the shim). */
  postSlowDisk: Outcome<CaseResult>
  slowSyncMs: number
  list1k: Outcome<CaseResult>
  list100k: Outcome<CaseResult>
  patchNoop: Outcome<CaseResult>
  patchChange: Outcome<CaseResult>
  imported: Outcome<ImportResult>
  /** New users per import run. */
  importUsers: number
  pgGet: Outcome<CaseResult>
  pgPost: Outcome<CaseResult>
  pgWorkers: Outcome<CaseResult>
  started: Outcome<StartResult>
  started10k: Outcome<StartResult>
  idle: Outcome<void>
  live: Outcome<LiveCaseResult>
  startSamples: readonly StartSample[]
  /** GET /metrics median ms, by case key. */
  scrapeMs: Readonly<Record<string, number>>
  /** RSS after a list case's load, by case key. */
  rssAfterLoad: Readonly<Record<string, number>>
}

/**
 * The ratio of a row: the median of the per-run ratios (each run measured the service and its
 * reference back to back, so a run's pair shares the machine's mood), with their range when there
 * is more than one run: on a busy machine the range says more than the median.
 */
export const pairedRatio = (
  service: readonly number[],
  reference: readonly number[],
): { value: number; text: string } => {
  const ratios = service.map((s, i) => s / (reference[i] ?? Number.NaN)).filter(Number.isFinite)
  const value = median(ratios)
  if (ratios.length < 2) return { value, text: fmt.ratio(value) }
  return {
    value,
    text: `${fmt.ratio(value)} (${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)})`,
  }
}

/** Service and reference rps of a case as a row; `against` picks the auth reference for GET. */
const rpsRow = (
  section: Row['section'],
  path: string,
  outcome: Outcome<CaseResult>,
  goal: string,
  pass: ((ratio: number) => boolean) | null,
  against: Exclude<keyof CaseResult['runs'], 'service'> = 'reference',
): Row => {
  if (!outcome.ok) return emptyRow(section, path, goal, outcome.why)
  const c = outcome.value
  const ref = c[against]
  if (ref === undefined) return emptyRow(section, path, goal, 'error: no reference measured')
  const ratio = pairedRatio(
    c.runs.service.map((r) => r.rps),
    c.runs[against].map((r) => r.rps),
  )
  return {
    section,
    path,
    service: fmt.rps(c.service.rps),
    reference: fmt.rps(ref.rps),
    ratio: ratio.text,
    goal,
    met: judge(pass === null ? null : pass(ratio.value), c.service.errors + ref.errors),
  }
}

/** One row of a figure measured beside a reference (start time, latency, import rate). */
const valueRow = (
  section: Row['section'],
  path: string,
  service: string,
  reference: string,
  ratio: string,
  goal: string,
  met: string,
): Row => ({ section, path, service, reference, ratio, goal, met })

export const detailRows = (cases: readonly CaseResult[]): string =>
  markdownTable(
    [
      'case',
      'users',
      'svc rps',
      'ref rps',
      'auth ref rps',
      'svc CPU/req',
      'ref CPU/req',
      'auth CPU/req',
      'svc p50',
      'svc p99',
      'errors',
    ],
    cases.map((c) => [
      c.label,
      c.users >= 1000 && c.users % 1000 === 0 ? `${c.users / 1000}k` : String(c.users),
      c.service.rps.toFixed(0),
      c.reference.rps.toFixed(0),
      c.authReference === undefined ? '' : c.authReference.rps.toFixed(0),
      fmt.us(c.service.cpuUsPerReq),
      fmt.us(c.reference.cpuUsPerReq),
      c.authReference === undefined ? '' : fmt.us(c.authReference.cpuUsPerReq),
      fmt.ms(c.service.p50Ms),
      fmt.ms(c.service.p99Ms),
      String(c.service.errors + c.reference.errors + (c.authReference?.errors ?? 0)),
    ]),
    new Set([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]),
  )

/** Every row: issue 30's first (all of them, measured or not), then the earlier figures. */
export const buildRows = (results: BenchResults): Row[] => {
  const {
    getById,
    getByIdLimited,
    postKeyed,
    postWebhook,
    webhookLag,
    webhookLagRate,
    post1k,
    post100k,
    postSlowDisk,
    slowSyncMs,
    list1k,
    list100k,
    patchNoop,
    patchChange,
    imported,
    importUsers: IMPORT_USERS,
    pgGet,
    pgPost,
    pgWorkers,
    started,
    started10k,
    idle,
    live,
    startSamples,
    scrapeMs,
    rssAfterLoad,
  } = results
  // The rows of issue 30's table, in its order.
  const rows: Row[] = []
  rows.push(
    rpsRow(
      'issue',
      '`GET /users/{id}` with a token, logging at info, metrics on (10k users; ref: raw node:http, cached HS256, a Map)',
      getById,
      '≥ 0.85×',
      (r) => r >= 0.85,
      'authReference',
    ),
  )
  rows.push(
    rpsRow(
      'issue',
      '`GET /users/{id}`, the same case (ref: fastify 5 + @fastify/jwt, the same Map, its logger at info)',
      getById,
      '≥ 1.6×',
      (r) => r >= 1.6,
      'fastifyReference',
    ),
  )
  rows.push(
    rpsRow(
      'issue',
      '`POST /users`, file store, 1k users (ref: one raw durable write per request, same concurrency)',
      post1k,
      '≥ 3×',
      (r) => r >= 3,
    ),
  )
  rows.push(
    rpsRow(
      'issue',
      `\`POST /users\`, the same on a disk whose every fsync takes ${slowSyncMs} ms (an LD_PRELOAD shim on both)`,
      postSlowDisk,
      '≥ 3×',
      (r) => r >= 3,
    ),
  )
  const importPath = `\`POST /users:import\`, file store, ${IMPORT_USERS.toLocaleString('en-US')} users (ref: raw durable files, 64 at a time)`
  // The goal is the ratio, which holds on a slower machine too; the rate's earlier goal is shown
  // with the earlier figures.
  if (imported.ok) {
    const svc = median(imported.value.service)
    const ref = median(imported.value.reference)
    const ratio = pairedRatio(imported.value.service, imported.value.reference)
    const invalid =
      imported.value.failed > 0 ? `invalid: ${imported.value.failed} lines not created` : undefined
    rows.push(
      valueRow(
        'issue',
        importPath,
        fmt.perS(svc, 'users'),
        fmt.perS(ref, 'files'),
        ratio.text,
        '≥ 10×',
        invalid ?? judge(ratio.value >= 10),
      ),
      valueRow(
        'other',
        '`POST /users:import`, the same runs: users a second',
        fmt.perS(svc, 'users'),
        '-',
        '-',
        '≥ 20,000 users/s',
        invalid ?? judge(svc >= 20_000),
      ),
    )
  } else rows.push(emptyRow('issue', importPath, '≥ 10×', imported.why))
  rows.push(
    rpsRow(
      'issue',
      '`POST /users`, PostgreSQL (ref: node:http + pg, the same inserts in one transaction)',
      pgPost,
      '≥ 0.7×',
      (r) => r >= 0.7,
    ),
  )
  rows.push(
    rpsRow(
      'issue',
      '`GET /users/{id}`, PostgreSQL (ref: node:http + pg, the same SELECT)',
      pgGet,
      '≥ 0.8×',
      (r) => r >= 0.8,
    ),
  )
  const workersPath =
    '`WORKERS=2` (PostgreSQL GET): server CPU per request, primary and workers (ref: `WORKERS=1`)'
  if (pgWorkers.ok) {
    const c = pgWorkers.value
    const ratio = pairedRatio(
      c.runs.service.map((r) => r.cpuUsPerReq),
      c.runs.reference.map((r) => r.cpuUsPerReq),
    )
    rows.push(
      valueRow(
        'issue',
        workersPath,
        `${fmt.us(c.service.cpuUsPerReq)} (${fmt.rps(c.service.rps)})`,
        `${fmt.us(c.reference.cpuUsPerReq)} (${fmt.rps(c.reference.rps)})`,
        ratio.text,
        '≤ 1.15×',
        judge(ratio.value <= 1.15, c.service.errors + c.reference.errors),
      ),
    )
  } else rows.push(emptyRow('issue', workersPath, '≤ 1.15×', pgWorkers.why))
  for (const [outcome, users, goalMs] of [
    [started, '100,000', 500],
    [started10k, '10,000', 300],
  ] as const) {
    const path = `start with ${users} users, from the snapshot of a clean stop (ref: raw node reading the files into a Map)`
    const goal = `≤ ${fmt.s(goalMs)}`
    if (!outcome.ok) {
      rows.push(emptyRow('issue', path, goal, outcome.why))
      continue
    }
    const svc = median(outcome.value.serviceMs)
    rows.push(
      valueRow(
        'issue',
        path,
        fmt.s(svc),
        fmt.s(median(outcome.value.referenceMs)),
        pairedRatio(outcome.value.serviceMs, outcome.value.referenceMs).text,
        goal,
        judge(svc <= goalMs),
      ),
    )
  }
  if (started.ok) {
    const { filesMs, stopMs, referenceMs } = started.value
    rows.push(
      valueRow(
        'issue',
        'start with 100,000 users without a snapshot (first start, or after a crash: every file read)',
        fmt.s(median(filesMs)),
        fmt.s(median(referenceMs)),
        pairedRatio(filesMs, referenceMs).text,
        'info',
        'info',
      ),
      valueRow(
        'issue',
        'stop with 100,000 users (SIGTERM to exit; writes the snapshot)',
        fmt.s(median(stopMs)),
        '-',
        '-',
        'info',
        'info',
      ),
    )
  }
  const livePaths = [
    [
      'live event latency, median (write acknowledged → SSE frame; ref: raw node:http, same write)',
      0.5,
      5,
    ],
    ['live event latency, p99', 0.99, 50],
  ] as const
  for (const [path, q, goalMs] of livePaths) {
    if (!live.ok) {
      rows.push(emptyRow('issue', path, `≤ ${goalMs} ms`, live.why))
      continue
    }
    const svc = median(live.value.service.map((r) => quantile(r.latencies, q)))
    const ref = median(live.value.reference.map((r) => quantile(r.latencies, q)))
    const lost = live.value.service.reduce((sum, r) => sum + r.missing + r.errors, 0)
    const firstShare = (results: readonly LiveResult[]): string => {
      const first = results.reduce((sum, r) => sum + r.framesFirst, 0)
      const all = results.reduce((sum, r) => sum + r.latencies.length, 0)
      return `${((100 * first) / Math.max(1, all)).toFixed(0)}% frame first`
    }
    rows.push(
      valueRow(
        'issue',
        path,
        q === 0.5 ? `${fmt.ms(svc)} (${firstShare(live.value.service)})` : fmt.ms(svc),
        q === 0.5 ? `${fmt.ms(ref)} (${firstShare(live.value.reference)})` : fmt.ms(ref),
        pairedRatio(
          live.value.service.map((r) => quantile(r.latencies, q)),
          live.value.reference.map((r) => quantile(r.latencies, q)),
        ).text,
        `≤ ${goalMs} ms`,
        lost > 0
          ? `invalid: ${lost} writes failed or their events never came`
          : judge(svc <= goalMs),
      ),
    )
  }

  // The project's earlier figures.
  rows.push(
    rpsRow('other', '`GET /users/{id}` (ref: fixed body)', getById, '≥ 0.60×', (r) => r >= 0.6),
  )
  rows.push(
    rpsRow(
      'other',
      '`GET /users/{id}` (ref: fastify 5 + @fastify/jwt, the same Map, logging off)',
      getById,
      'info',
      null,
      'fastifyQuietReference',
    ),
  )
  rows.push(
    rpsRow('other', '`GET /users?limit=100`, 1k users (ref: fixed body)', list1k, 'info', null),
  )
  rows.push(
    rpsRow('other', '`GET /users?limit=100`, 100k users (ref: fixed body)', list100k, 'info', null),
  )
  if (list1k.ok && list100k.ok) {
    const cost = list1k.value.service.rps / list100k.value.service.rps
    rows.push(
      valueRow(
        'other',
        '`GET /users?limit=100`: cost at 100k over cost at 1k',
        fmt.rps(list100k.value.service.rps),
        fmt.rps(list1k.value.service.rps),
        fmt.ratio(cost),
        '≤ 1.5×',
        judge(cost <= 1.5, list1k.value.service.errors + list100k.value.service.errors),
      ),
    )
  }
  rows.push(
    rpsRow(
      'other',
      '`POST /users`, file store, 100k users (ref: raw durable write)',
      post100k,
      '≥ 3×',
      (r) => r >= 3,
    ),
  )
  if (post1k.ok && post100k.ok) {
    const scale = post100k.value.service.rps / post1k.value.service.rps
    rows.push(
      valueRow(
        'other',
        '`POST /users`: rps at 100k users over rps at 1k',
        fmt.rps(post100k.value.service.rps),
        fmt.rps(post1k.value.service.rps),
        fmt.ratio(scale),
        '≥ 0.8×',
        judge(scale >= 0.8, post1k.value.service.errors + post100k.value.service.errors),
      ),
    )
  }
  rows.push(
    rpsRow(
      'other',
      '`GET /users/{id}` with rate limits on, every request counted (ref: the same service, limits off)',
      getByIdLimited,
      '≥ 0.95×',
      (r) => r >= 0.95,
    ),
  )
  rows.push(
    rpsRow(
      'other',
      '`POST /users` with an `Idempotency-Key` on each request (ref: the same POST without one)',
      postKeyed,
      '≥ 0.9×',
      (r) => r >= 0.9,
    ),
  )
  rows.push(
    rpsRow(
      'other',
      '`POST /users` with one webhook endpoint that answers at once (ref: the same POST with none)',
      postWebhook,
      '≥ 0.9×',
      (r) => r >= 0.9,
    ),
  )
  rows.push(...webhookLagRows(webhookLag, webhookLagRate))
  rows.push(
    rpsRow(
      'other',
      '`PATCH /users/{id}` no-op with If-Match (ref: raw durable write)',
      patchNoop,
      'info',
      null,
    ),
  )
  rows.push(
    rpsRow(
      'other',
      '`PATCH /users/{id}` a real change (ref: raw durable write)',
      patchChange,
      'info',
      null,
    ),
  )
  const scrape100k = scrapeMs[`list-${LARGE}`]
  if (scrape100k !== undefined) {
    rows.push({
      section: 'other',
      path: '`GET /metrics` with 100k users, median of 21',
      service: fmt.ms(scrape100k),
      reference: '-',
      ratio: '-',
      goal: '< 5 ms',
      met: judge(scrape100k < 5),
    })
  }
  const samplesFor = (users: number): StartSample[] => startSamples.filter((x) => x.users === users)
  const rssRow = (path: string, samples: StartSample[], limit: number, why: string): Row =>
    samples.length === 0
      ? emptyRow('other', path, `< ${limit} MB`, why)
      : {
          section: 'other',
          path,
          service: fmt.mb(median(samples.map((x) => x.rssMb))),
          reference: '-',
          ratio: '-',
          goal: `< ${limit} MB`,
          met: judge(median(samples.map((x) => x.rssMb)) < limit),
        }
  const idleSamples = samplesFor(0)
  if (idleSamples.length > 0) {
    rows.push({
      section: 'other',
      path: 'start-up, empty data dir',
      service: fmt.s(median(idleSamples.map((x) => x.startMs))),
      reference: '-',
      ratio: '-',
      goal: 'info',
      met: 'info',
    })
  }
  rows.push(
    rssRow('RSS 1 s after start, empty data dir', idleSamples, 60, idle.ok ? 'error' : idle.why),
  )
  rows.push(
    rssRow(
      'RSS 1 s after start, 100k users',
      samplesFor(LARGE),
      250,
      started.ok ? 'error' : started.why,
    ),
  )
  const rss100k = rssAfterLoad[`list-${LARGE}`]
  if (rss100k !== undefined) {
    rows.push({
      section: 'other',
      path: 'RSS after the list load, 100k users',
      service: fmt.mb(rss100k),
      reference: '-',
      ratio: '-',
      goal: 'info',
      met: 'info',
    })
  }

  return rows
}
