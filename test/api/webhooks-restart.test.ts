import assert from 'node:assert/strict'
import { rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import type { UserServiceOptions } from '../../src/process/create-user-service.js'
import { assertProblem } from '../helpers/http.js'
import { waitFor } from '../helpers/ops.js'
import { freshSchema, replicaStore, SKIP_POSTGRES } from '../helpers/postgres.js'
import { captureHooks, startHooks } from '../helpers/webhook-api.js'

/** The durable stores, each reopened on what the first service left. */
const DURABLE: readonly {
  name: string
  skip: string | boolean
  reopen: (t: TestContext) => () => Partial<UserServiceOptions>
}[] = [
  {
    name: 'file',
    skip: false,
    reopen: (t) => {
      const dataDir = path.join(tmpdir(), `webhooks-restart-${process.pid}-${Date.now()}`)
      t.after(() => rm(dataDir, { recursive: true, force: true }))
      return () => ({ dataDir })
    },
  },
  {
    name: 'PostgreSQL',
    skip: SKIP_POSTGRES,
    reopen: (t) => {
      const schema = freshSchema(t)
      return () => ({ store: replicaStore(t, schema) })
    },
  },
]

for (const durable of DURABLE) {
  describe(`webhook endpoints across a restart (${durable.name} store)`, {
    skip: durable.skip,
  }, () => {
    it('shows the same endpoints, cursors and secrets after a restart', async (t) => {
      const options = durable.reopen(t)
      const store = { name: durable.name, skip: false, make: options }
      const first = await startHooks(t, store)
      const a = await first.createHook({ eventTypes: ['user.created'], description: 'a' })
      const b = await first.createHook()
      // Both paused, so that no delivery moves a cursor meanwhile: on PostgreSQL an enabled
      // endpoint with nothing to deliver follows the feed's head, which a start moves (event ids
      // jump at a start; docs/events.md).
      for (const { id } of [a, b])
        assert.equal(
          (await first.hooks('PATCH', `/${id}`, { json: { enabled: false } })).status,
          200,
        )
      await first.hooks('POST', `/${b.id}:rotateSecret`, { json: { overlapSeconds: 60 } })
      const moved = await first.hooks('PUT', `/${b.id}/cursor`, {
        json: { after: '00000000000000aa' },
      })
      assert.equal(moved.status, 200, moved.text)
      await first.hooks('DELETE', `/${(await first.createHook()).id}`)
      const before = await captureHooks(first)
      await first.service.close()
      const second = await startHooks(t, store)
      const after = await captureHooks(second)
      assert.deepEqual(after.stored, before.stored)
      assert.deepEqual(after.cursors, before.cursors)
      assert.equal(after.listed, before.listed)
      assert.equal(before.stored.length, 2)
      assert.ok(before.cursors.includes('00000000000000aa'), JSON.stringify(before.cursors))
    })
  })
}

describe('webhook routes in maintenance (file store)', () => {
  it('answers every webhook route 503 maintenance with Retry-After and stores nothing', async (t) => {
    const s = await startHooks(t, { name: 'file', skip: false, make: () => ({}) })
    const created = await s.createHook()
    const before = await captureHooks(s)
    const marker = path.join(s.dataDir, 'maintenance')
    await writeFile(marker, '')
    t.after(() => rm(marker, { force: true }))
    await waitFor(
      'maintenance',
      async () => {
        const res = await s.hooks('GET')
        return res.status === 503 ? res : undefined
      },
      5000,
    )
    for (const [method, target, json] of [
      ['GET', '', undefined],
      ['POST', '', { url: 'https://a.example.com' }],
      ['GET', `/${created.id}`, undefined],
      ['PATCH', `/${created.id}`, { description: 'x' }],
      ['DELETE', `/${created.id}`, undefined],
      ['POST', `/${created.id}:rotateSecret`, undefined],
      ['GET', `/${created.id}/deliveries`, undefined],
      ['GET', `/${created.id}/cursor`, undefined],
      ['PUT', `/${created.id}/cursor`, { after: '0000000000000001' }],
    ] as const) {
      const res = await s.hooks(method, target, json === undefined ? {} : { json })
      assertProblem(res, 503, 'maintenance')
      assert.match(res.headers.get('retry-after') ?? '', /^\d+$/)
    }
    await rm(marker)
    await waitFor(
      'the end of maintenance',
      async () => {
        const res = await s.hooks('GET')
        return res.status === 200 ? res : undefined
      },
      5000,
    )
    assert.deepEqual(await captureHooks(s), before)
  })
})
