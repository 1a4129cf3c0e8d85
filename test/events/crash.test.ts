import assert from 'node:assert/strict'
import path from 'node:path'
import { describe, it } from 'node:test'

import type { ChangeEvent } from '../../src/events/event.js'
import { FileStore } from '../../src/store/file-store.js'
import { PROJECT_ROOT, sleep, spawnService, type Child } from '../helpers/child.js'
import { makeTempDir } from '../helpers/service.js'

const WRITER = path.join(PROJECT_ROOT, 'test', 'helpers', 'crash-writer.ts')
const ACK = /^([0-9a-f-]{36}) (\d+)$/
/** After how many acknowledged writes each round kills the writer (8 concurrent writers). */
const KILL_AFTER_ACKS = [1, 40, 9, 120, 25, 70] as const

function acksOf(stdout: string): [string, number][] {
  return stdout.split('\n').slice(1, -1).map((line) => {
    const match = ACK.exec(line)
    if (match === null) throw new Error(`an unexpected line from the crash writer: ${line}`)
    return [match[1] ?? '', Number(match[2])]
  })
}

async function killAfter(child: Child, count: number): Promise<void> {
  const deadline = Date.now() + 60_000
  while (!child.stdout().startsWith('ready\n') || acksOf(child.stdout()).length < count) {
    if (child.proc.exitCode !== null || Date.now() > deadline) throw new Error(`the writer stopped or stalled:\n${child.stderr()}`)
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
  it('has exactly one event per acknowledged change, none without its change, versions in order, across rounds', { timeout: 240_000 }, async (t) => {
    const dataDir = path.join(await makeTempDir(t, 'events-crash-'), 'data')
    const acked: [string, number][] = []
    let lastId = ''
    for (const [index, count] of KILL_AFTER_ACKS.entries()) {
      const round = index + 1
      const child = spawnService({ dataDir, args: ['--import', 'tsx', WRITER, dataDir, String(round)] })
      t.after(() => { child.proc.kill('SIGKILL') })
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
        assert.ok(ids.at(-1) === undefined || (ids.at(-1) ?? '') >= lastId, `round ${round}: ids went back`)
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
          assert.equal(byChange.get(`${id} ${version}`), 1, `round ${round}: acknowledged ${id} v${version} has ${byChange.get(`${id} ${version}`) ?? 0} events`)
        }
        for (const [userId, list] of versions) {
          const record = await store.get(userId)
          assert.ok(record !== undefined, `round ${round}: an event for user ${userId}, who is not stored`)
          // Every version from 1 to the stored one has its event, in order, and none beyond it.
          assert.deepEqual(list, Array.from({ length: record.user.version }, (_, i) => i + 1), `round ${round}: versions of ${userId}`)
        }
        assert.equal(versions.size, store.count(), `round ${round}: every stored user has its events`)
      } finally {
        await store.close()
      }
    }
  })
})
