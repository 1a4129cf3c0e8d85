import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { createServiceMetrics } from '../../src/metrics/service-metrics.js'
import type { WebhookCounts } from '../../src/metrics/webhook-metrics.js'
import { parseExposition } from './exposition.js'

function render(webhooks: (() => WebhookCounts) | undefined): string {
  return createServiceMetrics({
    routes: [],
    usersStored: () => 0,
    tokenCache: () => ({ cached: 0, cachedBytes: 0, verifications: 0 }),
    droppedLogLines: () => 0,
    dataDir: undefined,
    webhooks,
  }).render()
}

describe('the webhook metric families', () => {
  it('show attempts by result and endpoints by state as delivery counts them', () => {
    let counts: WebhookCounts = {
      attemptsSucceeded: 7,
      attemptsFailed: 2,
      endpointsEnabled: 3,
      endpointsDisabled: 1,
    }
    const metrics = createServiceMetrics({
      routes: [],
      usersStored: () => 0,
      tokenCache: () => ({ cached: 0, cachedBytes: 0, verifications: 0 }),
      droppedLogLines: () => 0,
      dataDir: undefined,
      webhooks: () => counts,
    })
    let families = parseExposition(metrics.render())
    const attempts = families.get('user_service_webhook_attempts_total')
    assert.equal(attempts?.type, 'counter')
    assert.deepEqual(
      attempts?.samples.map((sample) => [sample.labels.result, sample.value]),
      [
        ['succeeded', 7],
        ['failed', 2],
      ],
    )
    const endpoints = families.get('user_service_webhook_endpoints')
    assert.equal(endpoints?.type, 'gauge')
    assert.deepEqual(
      endpoints?.samples.map((sample) => [sample.labels.state, sample.value]),
      [
        ['enabled', 3],
        ['disabled', 1],
      ],
    )
    counts = { ...counts, attemptsSucceeded: 8, endpointsEnabled: 2, endpointsDisabled: 2 }
    families = parseExposition(metrics.render())
    assert.equal(families.get('user_service_webhook_attempts_total')?.samples[0]?.value, 8)
    assert.equal(families.get('user_service_webhook_endpoints')?.samples[1]?.value, 2)
  })

  it('are absent without delivery', () => {
    const families = parseExposition(render(undefined))
    assert.equal(families.has('user_service_webhook_attempts_total'), false)
    assert.equal(families.has('user_service_webhook_endpoints'), false)
  })
})
