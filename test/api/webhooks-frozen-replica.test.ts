import assert from 'node:assert/strict'
import type { ServerResponse } from 'node:http'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import { type RunningChild, sleep, startChild } from '../helpers/child.js'
import { request } from '../helpers/http.js'
import { waitFor } from '../helpers/ops.js'
import { freshDatabase, SKIP_POSTGRES } from '../helpers/postgres.js'
import { makeTempDir, uniqueEmail } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'
import { startReceiver } from '../helpers/webhook-receivers.js'

const token = makeToken({ scope: 'users:write webhooks:admin' })

/** Creates a user through `replica`; its event is what the endpoint is sent next. */
async function createUser(replica: RunningChild): Promise<void> {
  const res = await request('POST', `${replica.url}/users`, {
    token,
    json: { email: uniqueEmail('frozen'), name: 'Frozen' },
  })
  assert.equal(res.status, 201, res.text)
}

async function cursorOf(replica: RunningChild, id: string): Promise<string> {
  const res = await request('GET', `${replica.url}/webhooks/${id}/cursor`, { token })
  assert.equal(res.status, 200, res.text)
  return res.json<{ after: string }>().after
}

/**
 * Waits until the endpoint's cursor, as `replica` reads it, stands at or past `eventId` (with no
 * event after it, the cursor may move on to the feed's head; ids of one length compare as text).
 */
const cursorAt = (replica: RunningChild, id: string, eventId: string): Promise<true> =>
  waitFor(`the cursor at or past ${eventId}`, async () =>
    (await cursorOf(replica, id)) >= eventId ? true : undefined,
  )

/** A replica on `url`, killed (woken first, if stopped) when the test ends. */
async function replica(t: TestContext, root: string, name: string, url: string) {
  const env = { DATABASE_URL: url, WEBHOOK_ALLOW_NETWORKS: '127.0.0.0/8' }
  const child = await startChild({ dataDir: path.join(root, name), env }, 30_000)
  t.after(() => {
    child.proc.kill('SIGCONT')
    return child.stop('SIGKILL')
  })
  return child
}

describe('a replica frozen (SIGSTOP) while its attempt is in flight', {
  skip: SKIP_POSTGRES,
}, () => {
  it('is taken over once its lease runs out; woken, it neither moves the cursor back nor sends beside the new holder', {
    timeout: 120_000,
  }, async (t) => {
    // The first request (the frozen replica's) is answered only when the test says; others at once.
    let held: ServerResponse | undefined
    const receiver = await startReceiver((_, res) => {
      if (held === undefined) held = res
      else res.writeHead(204).end()
    })
    t.after(() => receiver.close())
    const url = await freshDatabase(t)
    const root = await makeTempDir(t, 'frozen-')
    const a = await replica(t, root, 'a', url)
    const created = await request('POST', `${a.url}/webhooks`, {
      token,
      json: { url: receiver.url },
    })
    assert.equal(created.status, 201, created.text)
    const hook = created.json<{ id: string }>()
    // Only `a` runs: it takes the endpoint's lease and sends the first event.
    await createUser(a)
    const [first] = await receiver.waitFor(1)
    const b = await replica(t, root, 'b', url)
    a.proc.kill('SIGSTOP')

    // `b` gets the lease once `a`'s runs out unrenewed, and sends the same event again while
    // `a`'s request is still open: the exception docs/webhooks.md names.
    const [, again] = await receiver.waitFor(2, 40_000)
    assert.equal(again?.headers['webhook-id'], first?.headers['webhook-id'])
    assert.ok(held !== undefined && !held.destroyed, "the frozen replica's request is still open")
    // Its 2xx waits in the frozen process's socket; `b` goes on with the next event.
    held.writeHead(204).end()
    await cursorAt(b, hook.id, eventOf(again?.headers['webhook-id']))
    await createUser(b)
    const [, , second] = await receiver.waitFor(3)
    const secondId = eventOf(second?.headers['webhook-id'])
    await cursorAt(b, hook.id, secondId)

    // Woken, `a` finds its lease run out: it sends nothing more beside `b`, whose lease it is,
    // and the cursor `b` moved stays where `b` put it.
    a.proc.kill('SIGCONT')
    assert.equal((await request('GET', `${a.url}/healthz`)).status, 200)
    await sleep(2000)
    await createUser(a)
    const [, , , third] = await receiver.waitFor(4)
    const thirdId = eventOf(third?.headers['webhook-id'])
    await cursorAt(a, hook.id, thirdId)
    await sleep(1000)
    assert.deepEqual(
      receiver.received.map((received) => eventOf(received.headers['webhook-id'])),
      [
        eventOf(first?.headers['webhook-id']),
        eventOf(first?.headers['webhook-id']),
        secondId,
        thirdId,
      ],
    )
    assert.ok((await cursorOf(b, hook.id)) >= thirdId)
  })
})

/** The event id of a `webhook-id` header (`msg_<id>`). */
function eventOf(header: string | string[] | undefined): string {
  assert.equal(typeof header, 'string')
  return String(header).slice('msg_'.length)
}
