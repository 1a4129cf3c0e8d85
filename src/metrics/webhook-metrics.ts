/**
 * The webhook metric families (docs/operations.md, metrics): attempts by result, and endpoints
 * by state, read from delivery at each scrape.
 */
import type { Registry } from './registry.js'

/** What delivery counts: attempts made by this process, and the endpoints it knows now. */
export interface WebhookCounts {
  readonly attemptsSucceeded: number
  readonly attemptsFailed: number
  readonly endpointsEnabled: number
  readonly endpointsDisabled: number
}

/** Adds the families to a registry; `counts` is read at each collection. */
export function registerWebhookMetrics(registry: Registry, counts: () => WebhookCounts): void {
  const attempts = registry.counter(
    'user_service_webhook_attempts_total',
    'Webhook delivery attempts this process made, by result (succeeded: a 2xx answer).',
    ['result'],
  )
  const succeeded = attempts.labels('succeeded')
  const failed = attempts.labels('failed')
  const endpoints = registry.gauge(
    'user_service_webhook_endpoints',
    'Webhook endpoints registered, by state (disabled: by a client or by delivery).',
    ['state'],
  )
  const enabled = endpoints.labels('enabled')
  const disabled = endpoints.labels('disabled')
  registry.onCollect(() => {
    const now = counts()
    succeeded.setTotal(now.attemptsSucceeded)
    failed.setTotal(now.attemptsFailed)
    enabled.set(now.endpointsEnabled)
    disabled.set(now.endpointsDisabled)
  })
}
