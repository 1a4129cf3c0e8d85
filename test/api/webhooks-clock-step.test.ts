import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { startHooks } from '../helpers/webhook-api.js'
import { eventually, startReceiver } from '../helpers/webhook-receivers.js'

const LOCAL = { webhookAllowNetworks: ['127.0.0.0/8'] }
const HOUR_MS = 60 * 60 * 1000

describe('webhook retries when the wall clock steps', () => {
  it('a retry comes after its delay although the clock was set back an hour meanwhile', async (t) => {
    let offsetMs = 0
    const receiver = await startReceiver((_request, res) => {
      res.writeHead(receiver.received.length === 1 ? 500 : 204).end()
    })
    t.after(() => receiver.close())
    const s = await startHooks(
      t,
      { name: 'file', skip: false, make: () => ({}) },
      {
        ...LOCAL,
        webhookRetrySchedule: [1000],
        now: () => Date.now() + offsetMs,
      },
    )
    const hook = await s.createHook({ url: `${receiver.url}/hooks` })
    await s.createUser()
    // Once the failed attempt is logged (its retry scheduled), the clock steps back an hour (an
    // NTP step, a restored virtual machine).
    await eventually(async () => {
      const log = await s.hooks('GET', `/${hook.id}/deliveries`)
      return log.json<{ items: unknown[] }>().items.length === 1
    })
    offsetMs = -HOUR_MS
    const [first, second] = await Promise.race([
      receiver.waitFor(2),
      new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error('no retry within 10 s of a 1 s delay')), 10_000),
      ),
    ])
    assert.equal(first?.headers['webhook-id'], second?.headers['webhook-id'])
  })
})
