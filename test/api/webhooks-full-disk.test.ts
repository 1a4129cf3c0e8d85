import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import type { ServerResponse } from 'node:http'
import path from 'node:path'
import { describe, it } from 'node:test'

import { parseAttemptLine } from '../../src/store/file/stored-webhooks.js'
import {
  LOADED_LINE,
  type RunningChild,
  sleep,
  startChild,
  waitForOutput,
} from '../helpers/child.js'
import { request } from '../helpers/http.js'
import { waitFor } from '../helpers/ops.js'
import { fillDisk, tmpfsWorld } from '../helpers/tmpfs-world.js'
import { makeToken } from '../helpers/tokens.js'
import { ADMIN } from '../helpers/webhook-api.js'
import { startReceiver } from '../helpers/webhook-receivers.js'

const token = makeToken()
const USERS = 150
const APPEND_FAILED = 'could not append to a webhook delivery log; it is tried again'

/** GET /webhooks/{id}/deliveries, every page: the ids of the attempts the API shows. */
async function deliveries(url: string, id: string): Promise<string[]> {
  const ids: string[] = []
  let cursor: string | null = null
  do {
    const query: string = cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`
    const res = await request('GET', `${url}/webhooks/${id}/deliveries?limit=100${query}`, {
      token: ADMIN,
    })
    assert.equal(res.status, 200, res.text)
    const page = res.json<{ items: { id: string }[]; nextCursor: string | null }>()
    ids.push(...page.items.map((item) => item.id))
    cursor = page.nextCursor
  } while (cursor !== null)
  return ids.sort()
}

function countLines(child: RunningChild, msg: string): number {
  return child
    .stdout()
    .split('\n')
    .filter((line) => line.includes(`"msg":"${msg}"`)).length
}

describe('a webhook delivery log on a full disk (file store)', () => {
  it('logs the outage once, writes every attempt once there is room, and a restart shows the same log', {
    timeout: 90_000,
  }, async (t) => {
    const world = await tmpfsWorld(t)
    if (typeof world === 'string') {
      t.skip(world)
      return
    }
    const { mount, dataDir, later } = world
    const held: ServerResponse[] = []
    let holding = true
    const receiver = await startReceiver((_request, res) => {
      if (holding) held.push(res)
      else res.writeHead(204).end()
    })
    later(() => receiver.close())
    const options = { dataDir, env: { WEBHOOK_ALLOW_NETWORKS: '127.0.0.0/8' } }
    let child = await startChild(options)
    later(() => child.stop('SIGKILL'))
    await waitForOutput(child, LOADED_LINE)

    const created = await request('POST', `${child.url}/webhooks`, {
      token: ADMIN,
      json: { url: `${receiver.url}/hook` },
    })
    assert.equal(created.status, 201, created.text)
    const hookId = created.json<{ id: string }>().id
    const lines = Array.from({ length: USERS }, (_, i) =>
      JSON.stringify({ email: `hook-${i}@example.com`, name: `Hook ${i}` }),
    )
    const imported = await fetch(`${child.url}/users:import`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/x-ndjson' },
      body: `${lines.join('\n')}\n`,
    })
    const results = await imported.text()
    assert.equal(imported.status, 200, results)
    assert.equal(results.split('\n').filter((line) => line.includes('"status":201')).length, USERS)
    await waitFor('the first delivery', () => (held.length > 0 ? true : undefined), 10_000)

    // The disk fills up while the receiver holds its first answer; then every delivery goes
    // through, and each attempt's log line meets a full disk.
    const filler = path.join(mount, 'filler')
    fillDisk(filler)
    holding = false
    for (const res of held.splice(0)) res.writeHead(204).end()
    await receiver.waitFor(USERS, 30_000)
    await waitFor('the last attempt logged in memory', async () =>
      (await deliveries(child.url, hookId)).length === USERS ? true : undefined,
    )
    // Attempts' lines are appended at the store's next flush (every second): wait for it to meet
    // the full disk, then for one more flush, which must not say so again.
    await waitFor('the append refused', () =>
      countLines(child, APPEND_FAILED) > 0 ? true : undefined,
    )
    await sleep(1500)
    assert.equal(countLines(child, APPEND_FAILED), 1, child.stdout())

    rmSync(filler)
    const shown = await deliveries(child.url, hookId)
    const logFile = path.join(dataDir, 'webhooks', `${hookId}.log`)
    await waitFor(
      'every attempt in the log file',
      () => {
        if (!existsSync(logFile)) return undefined
        const onDisk = readFileSync(logFile, 'utf8')
          .split('\n')
          .map((line) => parseAttemptLine(line)?.id)
          .filter((id) => id !== undefined)
        return new Set(onDisk).size === USERS ? true : undefined
      },
      10_000,
    )
    // The cursor of the last delivery may still be on its way (a temp file renamed into place):
    // a temp file left behind would stay.
    await waitFor(
      'no temp file in webhooks/',
      () =>
        readdirSync(path.join(dataDir, 'webhooks')).some((name) => name.startsWith('.'))
          ? undefined
          : true,
      10_000,
    )

    const stopped = await child.stop('SIGTERM')
    assert.deepEqual(stopped, { code: 0, signal: null })
    child = await startChild(options)
    await waitForOutput(child, LOADED_LINE)
    assert.deepEqual(await deliveries(child.url, hookId), shown)
  })

  it('makes no attempt past the retry schedule while the disabling it ends with cannot be written', {
    timeout: 60_000,
  }, async (t) => {
    const world = await tmpfsWorld(t)
    if (typeof world === 'string') {
      t.skip(world)
      return
    }
    const { mount, dataDir, later } = world
    const filler = path.join(mount, 'filler')
    // The last attempt of the schedule (the third) is answered once the disk is full.
    let last: ServerResponse | undefined
    const receiver = await startReceiver((_request, res) => {
      if (receiver.received.length === 3) last = res
      else res.writeHead(500).end()
    })
    later(() => receiver.close())
    const env = { WEBHOOK_ALLOW_NETWORKS: '127.0.0.0/8', WEBHOOK_RETRY_SCHEDULE: '100ms,100ms' }
    const child = await startChild({ dataDir, env })
    later(() => child.stop('SIGKILL'))
    await waitForOutput(child, LOADED_LINE)
    const created = await request('POST', `${child.url}/webhooks`, {
      token: ADMIN,
      json: { url: `${receiver.url}/hook` },
    })
    assert.equal(created.status, 201, created.text)
    const hookId = created.json<{ id: string }>().id
    const user = await request('POST', `${child.url}/users`, {
      token,
      json: { email: 'failing-hook@example.com', name: 'Failing' },
    })
    assert.equal(user.status, 201, user.text)
    await waitFor('the last attempt of the schedule', () => last, 10_000)

    fillDisk(filler)
    last?.writeHead(500).end()
    await sleep(3000)
    assert.equal(receiver.received.length, 3, 'attempts past the schedule while the disk was full')

    rmSync(filler)
    await waitFor(
      'the endpoint disabled',
      async () => {
        const res = await request('GET', `${child.url}/webhooks/${hookId}`, { token: ADMIN })
        const hook = res.json<{ enabled: boolean; disabledReason: string | null }>()
        return hook.enabled ? undefined : hook
      },
      10_000,
    ).then((hook) => {
      assert.equal(hook.disabledReason, 'failing')
    })
    assert.equal(receiver.received.length, 3)
  })
})
