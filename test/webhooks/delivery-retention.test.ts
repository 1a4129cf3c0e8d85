import assert from 'node:assert/strict'
import { describe, it, type TestContext } from 'node:test'

import { FileStore } from '../../src/store/file/file-store.js'
import { makeTempDir } from '../helpers/service.js'
import { startDeliveryWorld } from '../helpers/webhook-delivery-world.js'
import { eventually, startReceiver } from '../helpers/webhook-receivers.js'

describe('webhook delivery behind the retained feed (file store)', () => {
  it('disables an endpoint whose cursor fell behind the pruned feed (cursor_expired)', async (t) => {
    const receiver = await startReceiver()
    t.after(() => receiver.close())
    let clock = Date.now()
    const dir = await makeTempDir(t, 'webhook-retention-')
    const store = new FileStore({ dataDir: dir, now: () => clock, eventsRetentionDays: 30 })
    const world = await startDeliveryWorld(t, { store })
    // Paused by a client while the events it has not had are pruned.
    const hook = await world.register(receiver.url, { enabled: false, disabledReason: 'manual' })
    await world.write()
    clock += 31 * 86_400_000
    await world.write()
    await store.pruneEvents()
    await world.patch(hook.endpoint.id, { enabled: true, disabledReason: null, disabledAt: null })
    await eventually(
      async () => (await store.webhooks.get(hook.endpoint.id))?.endpoint.enabled === false,
    )
    const stored = await store.webhooks.get(hook.endpoint.id)
    assert.equal(stored?.endpoint.disabledReason, 'cursor_expired')
    assert.equal(stored?.endpoint.version, 3)
    assert.equal(receiver.connections(), 0)
    assert.deepEqual(
      world.lines
        .filter((line) => line.msg === 'webhook endpoint disabled')
        .map((line) => line.fields),
      [{ endpointId: hook.endpoint.id, reason: 'cursor_expired' }],
    )
  })

  for (const [wait, schedule] of [
    ['200 ms', Array.from({ length: 20 }, () => 200)],
    ['an hour', [3_600_000]],
  ] as const) {
    it(`disables a failing endpoint whose event was pruned while it waited ${wait} to retry it (cursor_expired)`, async (t) => {
      await prunedWhileRetrying(t, schedule)
    })
  }
})

async function prunedWhileRetrying(t: TestContext, schedule: readonly number[]): Promise<void> {
  const receiver = await startReceiver((_, res) => res.writeHead(500).end())
  t.after(() => receiver.close())
  let skipped = 0
  const dir = await makeTempDir(t, 'webhook-retention-')
  const now = (): number => Date.now() + skipped
  const store = new FileStore({ dataDir: dir, now, eventsRetentionDays: 30 })
  const world = await startDeliveryWorld(t, {
    store,
    now,
    webhookRetrySchedule: schedule,
  })
  const hook = await world.register(receiver.url)
  await world.write()
  await receiver.waitFor(1)
  // The event it retries is pruned meanwhile: it must not go on from its copy of the feed.
  skipped = 31 * 86_400_000
  await world.write()
  await store.pruneEvents()
  await eventually(
    async () => (await store.webhooks.get(hook.endpoint.id))?.endpoint.enabled === false,
  )
  const stored = await store.webhooks.get(hook.endpoint.id)
  assert.equal(stored?.endpoint.disabledReason, 'cursor_expired')
}
