// The verdict of the webhook delivery lag case (webhooks.ts): its median against the goal, its p99
// beside it, and no verdict but a failure when an acknowledged write's event never arrived.
import { emptyRow, fmt, type Row } from './report.js'
import { median, type Outcome, type WebhookLagResult } from './results-types.js'

const GOAL_MS = 50
/** The goal holds at this rate; at another (BENCH_WEBHOOK_RATE) the figure is informative. */
const GOAL_RATE = 1000
/** Below this share of the rate asked for, the run did not measure the lag at that rate. */
const RATE_SHARE = 0.9

export const webhookLagRows = (lag: Outcome<WebhookLagResult>, rate: number): Row[] => {
  const perS = rate.toLocaleString('en-US')
  const medianPath = `webhook delivery lag at ${perS} writes/s, median (event time → arrival at a receiver answering 204)`
  const p99Path = 'webhook delivery lag, p99'
  if (!lag.ok)
    return [
      emptyRow('other', medianPath, `≤ ${GOAL_MS} ms`, lag.why),
      emptyRow('other', p99Path, 'info', lag.why),
    ]
  const { runs } = lag.value
  const sum = (pick: (r: (typeof runs)[number]) => number): number =>
    runs.reduce((total, r) => total + pick(r), 0)
  const acknowledged = sum((r) => r.acknowledged)
  const missing = sum((r) => r.missing)
  const failed = sum((r) => r.failed)
  const slowest = Math.min(...runs.map((r) => r.achievedRate))
  const medianMs = median(runs.map((r) => r.medianMs))
  const p99Ms = median(runs.map((r) => r.p99Ms))
  const delivered = `${sum((r) => r.delivered).toLocaleString('en-US')} of ${acknowledged.toLocaleString('en-US')} delivered`
  // A slower write rate than asked for only makes the lag easier: a miss stands, a pass does not.
  const slow = slowest < rate * RATE_SHARE ? `writes taken at ${slowest.toFixed(0)}/s` : undefined
  let met = medianMs <= GOAL_MS ? 'met' : 'missed'
  if (slow !== undefined) met = met === 'met' ? `invalid: ${slow}` : `missed (${slow})`
  if (rate !== GOAL_RATE) met = `info (the goal is at ${GOAL_RATE.toLocaleString('en-US')}/s)`
  if (failed > 0) met = `invalid: ${failed} failed writes`
  if (missing > 0)
    met = `failed: ${missing.toLocaleString('en-US')} of ${acknowledged.toLocaleString('en-US')} events not delivered`
  return [
    {
      section: 'other',
      path: medianPath,
      service: `${fmt.ms(medianMs)} (${delivered})`,
      reference: '-',
      ratio: '-',
      goal: `≤ ${GOAL_MS} ms`,
      met,
    },
    {
      section: 'other',
      path: p99Path,
      service: fmt.ms(p99Ms),
      reference: '-',
      ratio: '-',
      goal: 'info',
      met: 'info',
    },
  ]
}
