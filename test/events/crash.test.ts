import assert from 'node:assert/strict'
import path from 'node:path'
import { describe, it } from 'node:test'

import type { ChangeEvent } from '../../src/domain/event.js'
import { FileStore } from '../../src/store/file/file-store.js'
import { type Child, sleep, spawnService, startChild } from '../helpers/child.js'
import { helperScript } from '../helpers/child-scripts.js'
import { request } from '../helpers/http.js'
import { makeTempDir, uniqueEmail } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

const WRITER = helperScript('crash-writer')
const ACK = /^([0-9a-f-]{36}) (\d+)$/
/** After how many acknowledged writes each round kills the writer (8 concurrent writers). */
const KILL_AFTER_ACKS = [1, 40, 9, 120, 25, 70] as const

function acksOf(stdout: string): [string, number][] {
  return stdout
    .split('\n')
    .slice(1, -1)
    .map((line) => {
      const match = ACK.exec(line)
      if (match === null) throw new Error(`an unexpected line from the crash writer: ${line}`)
      return [match[1] ?? '', Number(match[2])]
    })
}

async function killAfter(child: Child, count: number): Promise<void> {
  const deadline = Date.now() + 60_000
  while (!child.stdout().startsWith('ready\n') || acksOf(child.stdout()).length < count) {
    if (child.proc.exitCode !== null || Date.now() > deadline)
      throw new Error(`the writer stopped or stalled:\n${child.stderr()}`)
    await sleep(2)
  }
  child.proc.kill('SIGKILL')
  await child.exited
}

async function readAll(store: FileStore): Promise<ChangeEvent[]> {
  const events: ChangeEvent[] = []
  let after: string | undefined
  for (;;) {
    const page = await store.events.read({ after, limit: 1000 })
    events.push(...page.items)
    if (page.items.length < 1000) return events
    after = page.nextCursor
  }
}

describe('the change feed after SIGKILL', () => {
  it('has exactly one event per acknowledged change, none without its change, versions in order, across rounds', {
    timeout: 240_000,
  }, async (t) => {
    const dataDir = path.join(await makeTempDir(t, 'events-crash-'), 'data')
    const acked: [string, number][] = []
    let lastId = ''
    for (const [index, count] of KILL_AFTER_ACKS.entries()) {
      const round = index + 1
      const child = spawnService({
        dataDir,
        args: [WRITER, dataDir, String(round)],
      })
      t.after(() => {
        child.proc.kill('SIGKILL')
      })
      await killAfter(child, count)
      acked.push(...acksOf(child.stdout()))

      const store = new FileStore({ dataDir })
      await store.open()
      try {
        const events = await readAll(store)
        const ids = events.map((event) => event.id)
        assert.deepEqual([...ids].sort(), ids, `round ${round}: ids in order`)
        assert.equal(new Set(ids).size, ids.length, `round ${round}: ids unique`)
        // Ids are never reused: every event of this round comes after the last one seen before.
        assert.ok(
          ids.at(-1) === undefined || (ids.at(-1) ?? '') >= lastId,
          `round ${round}: ids went back`,
        )
        lastId = ids.at(-1) ?? lastId
        const byChange = new Map<string, number>()
        const versions = new Map<string, number[]>()
        for (const event of events) {
          const key = `${event.userId} ${event.version}`
          byChange.set(key, (byChange.get(key) ?? 0) + 1)
          versions.set(event.userId, [...(versions.get(event.userId) ?? []), event.version])
          assert.equal(event.type, event.version === 1 ? 'user.created' : 'user.updated')
        }
        for (const [id, version] of acked) {
          assert.equal(
            byChange.get(`${id} ${version}`),
            1,
            `round ${round}: acknowledged ${id} v${version} has ${byChange.get(`${id} ${version}`) ?? 0} events`,
          )
        }
        for (const [userId, list] of versions) {
          const record = await store.get(userId)
          assert.ok(
            record !== undefined,
            `round ${round}: an event for user ${userId}, who is not stored`,
          )
          // Every version from 1 to the stored one has its event, in order, and none beyond it.
          assert.deepEqual(
            list,
            Array.from({ length: record.user.version }, (_, i) => i + 1),
            `round ${round}: versions of ${userId}`,
          )
        }
        assert.equal(
          versions.size,
          store.count(),
          `round ${round}: every stored user has its events`,
        )
      } finally {
        await store.close()
      }
    }
  })
})

interface Feed {
  items: { id: string; type: string; userId: string; version: number; actor?: string }[]
  nextCursor: string
}

describe('the change feed after SIGKILL of the service', () => {
  it('keeps exactly one event per acknowledged HTTP change, of every type, across rounds', {
    timeout: 240_000,
  }, async (t) => {
    const dataDir = path.join(await makeTempDir(t, 'events-crash-http-'), 'data')
    const token = makeToken({
      sub: 'crash-actor',
      scope: 'users:read users:write users:admin events:read',
    })
    /** Every acknowledged change, as `<userId> <version>`, and the users whose deletion was acknowledged. */
    const acked = new Set<string>()
    const deleted = new Set<string>()
    for (const round of [1, 2, 3]) {
      const child = await startChild({ dataDir })
      t.after(() => child.stop('SIGKILL'))
      const live: { id: string; version: number }[] = []
      let killed = false
      let count = 0
      const call = async (
        method: string,
        target: string,
        json?: unknown,
      ): Promise<{ status: number; body: { id: string; version: number } }> => {
        const res = await request(method, `${child.url}${target}`, {
          token,
          ...(json === undefined ? {} : { json }),
          ...(method === 'PATCH' ? { contentType: 'application/merge-patch+json' } : {}),
        })
        return { status: res.status, body: res.json<{ id: string; version: number }>() }
      }
      const worker = async (seed: number): Promise<void> => {
        for (let i = 0; !killed; i += 1) {
          try {
            const pick = live[(seed * 7 + i) % Math.max(1, live.length)]
            const action =
              pick === undefined || i % 5 === 0
                ? 'create'
                : ['patch', 'activate', 'suspend', 'delete'][(seed + i) % 4]
            if (action === 'create') {
              const res = await call('POST', '/users', {
                email: uniqueEmail('crash'),
                name: 'Crash',
              })
              if (res.status !== 201) throw new Error(`POST: ${res.status}`)
              acked.add(`${res.body.id} 1`)
              live.push({ id: res.body.id, version: 1 })
            } else if (pick !== undefined && action === 'delete') {
              const index = live.indexOf(pick)
              if (index !== -1) live.splice(index, 1)
              const res = await call('DELETE', `/users/${pick.id}`)
              if (res.status === 204) deleted.add(pick.id)
            } else if (pick !== undefined) {
              const res =
                action === 'patch'
                  ? await call('PATCH', `/users/${pick.id}`, {
                      name: `Crash ${round}.${seed}.${i}`,
                    })
                  : await call('POST', `/users/${pick.id}:${action ?? 'activate'}`)
              if (res.status === 200) acked.add(`${pick.id} ${res.body.version}`)
            }
            count += 1
            if (count >= 40 * round && !killed) {
              killed = true
              child.proc.kill('SIGKILL')
            }
          } catch (error) {
            if (!killed) throw error
          }
        }
      }
      await Promise.all([1, 2, 3, 4, 5, 6].map(worker))
      await child.exited

      const again = await startChild({ dataDir })
      try {
        const events: Feed['items'] = []
        let after = ''
        for (;;) {
          const res = await request(
            'GET',
            `${again.url}/events?limit=1000${after === '' ? '' : `&after=${after}`}`,
            { token },
          )
          assert.equal(res.status, 200, res.text)
          const page = res.json<Feed>()
          events.push(...page.items)
          if (page.items.length < 1000) break
          after = page.nextCursor
        }
        const changes = new Map<string, number>()
        const byUser = new Map<string, Feed['items']>()
        for (const event of events) {
          const key = `${event.userId} ${event.version}`
          changes.set(key, (changes.get(key) ?? 0) + 1)
          byUser.set(event.userId, [...(byUser.get(event.userId) ?? []), event])
          assert.equal(event.actor, 'crash-actor')
        }
        for (const key of acked)
          assert.equal(changes.get(key), 1, `round ${round}: acknowledged change ${key}`)
        for (const [userId, list] of byUser) {
          const versions = list.map((event) => event.version)
          assert.deepEqual(
            versions,
            Array.from({ length: versions.length }, (_, i) => i + 1),
            `round ${round}: versions of ${userId}`,
          )
          const res = await request('GET', `${again.url}/users/${userId}`, { token })
          const last = list.at(-1)
          if (last?.type === 'user.deleted') {
            assert.equal(
              res.status,
              404,
              `round ${round}: ${userId} has a deletion event but is stored`,
            )
          } else {
            assert.equal(res.status, 200, `round ${round}: ${userId} has events but is not stored`)
            assert.equal(
              res.json<{ version: number }>().version,
              last?.version,
              `round ${round}: ${userId}'s last event is its stored version`,
            )
          }
        }
        for (const id of deleted)
          assert.equal(
            byUser.get(id)?.at(-1)?.type,
            'user.deleted',
            `round ${round}: acknowledged deletion of ${id}`,
          )
      } finally {
        await again.stop()
      }
    }
  })
})
