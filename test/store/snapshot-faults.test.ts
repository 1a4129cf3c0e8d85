import assert from 'node:assert/strict'
import { copyFileSync, existsSync, readdirSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'

import type { User } from '../../src/domain/user.js'
import {
  type ChildOptions,
  LOADED_LINE,
  type RunningChild,
  sleep,
  startChild,
  waitForOutput,
} from '../helpers/child.js'
import { assertProblem, request } from '../helpers/http.js'
import { uniqueEmail } from '../helpers/service.js'
import { compileShim, shimEnv } from '../helpers/syscall-shim.js'
import { type Later, makeWorld } from '../helpers/tmpfs-world.js'
import { makeToken } from '../helpers/tokens.js'

const token = makeToken()
const shim = compileShim()
const SNAPSHOT = 'snapshot'
const SNAPSHOT_TEMP = /^\.snapshot\..*\.tmp$/
const NOT_USED = 'the users snapshot was not used; reading every user file'

/** Starts the service, and waits for the log lines of its load. */
async function start(options: ChildOptions, later: Later): Promise<RunningChild> {
  const child = await startChild(options, 60_000)
  later(() => child.stop('SIGKILL'))
  await waitForOutput(child, LOADED_LINE)
  return child
}

/** The JSON log lines of a child with this message. */
function logLines(child: RunningChild, msg: string): Record<string, unknown>[] {
  return child
    .stdout()
    .split('\n')
    .filter((line) => line.includes(`"msg":"${msg}"`))
    .map((line) => JSON.parse(line) as Record<string, unknown>)
}

/**
 * Waits until the checkpoints are over: the count of directory fsyncs in /metrics has not moved
 * across ten checkpoint intervals of 20 ms.
 */
async function checkpointsOver(url: string): Promise<void> {
  const directorySyncs = async (): Promise<string | undefined> => {
    const metrics = await request('GET', `${url}/metrics`)
    assert.equal(metrics.status, 200)
    return /^user_service_store_fsync_seconds_count\{target="directory"\} (\d+)$/m.exec(
      metrics.text,
    )?.[1]
  }
  const deadline = Date.now() + 30_000
  let last = await directorySyncs()
  for (let still = 0; still < 10; still += 1) {
    assert.ok(Date.now() < deadline, 'the checkpoints never ended')
    await sleep(20)
    const now = await directorySyncs()
    if (now !== last) still = -1
    last = now
  }
  assert.ok(last !== undefined, 'no count of directory fsyncs in /metrics')
}

/** What the service acknowledged: live users at their last answer, and deleted ids. */
interface Acked {
  readonly users: Map<string, User>
  readonly deleted: string[]
}

/** Creates users, changes one, deletes one; every answer is an acknowledgment kept in `acked`. */
async function writeSome(url: string, acked: Acked, count = 6): Promise<void> {
  const created = await Promise.all(
    Array.from({ length: count }, async () => {
      const res = await request('POST', `${url}/users`, {
        token,
        json: { email: uniqueEmail('snap'), name: 'Snap Shot' },
      })
      assert.equal(res.status, 201, res.text)
      return res.json<User>()
    }),
  )
  for (const user of created) acked.users.set(user.id, user)
  const [changed, gone] = created
  assert.ok(changed !== undefined && gone !== undefined)
  const patched = await request('PATCH', `${url}/users/${changed.id}`, {
    token,
    json: { name: 'Changed Once' },
  })
  assert.equal(patched.status, 200, patched.text)
  acked.users.set(changed.id, patched.json<User>())
  assert.equal((await request('DELETE', `${url}/users/${gone.id}`, { token })).status, 204)
  acked.users.delete(gone.id)
  acked.deleted.push(gone.id)
}

/** Every acknowledged user is served as acknowledged; every deleted one is 404. */
async function assertServes(url: string, acked: Acked): Promise<void> {
  for (const [id, user] of acked.users) {
    const res = await request('GET', `${url}/users/${id}`, { token })
    assert.equal(res.status, 200, res.text)
    assert.deepEqual(res.json(), user)
    assert.equal(res.headers.get('etag'), `"v${user.version}"`)
  }
  for (const id of acked.deleted)
    assertProblem(await request('GET', `${url}/users/${id}`, { token }), 404, 'not_found')
  const list = await request('GET', `${url}/users?limit=100`, { token })
  assert.equal(list.status, 200, list.text)
  assert.equal(list.json<{ items: User[] }>().items.length, acked.users.size)
}

function snapshotFiles(dataDir: string): string[] {
  return readdirSync(dataDir).filter((name) => name === SNAPSHOT || SNAPSHOT_TEMP.test(name))
}

/** Waits until a file of the data directory matches, polling every millisecond. */
async function waitForFile(dataDir: string, match: (name: string) => boolean): Promise<void> {
  const deadline = Date.now() + 20_000
  while (!readdirSync(dataDir).some(match)) {
    if (Date.now() > deadline) throw new Error('the file never appeared')
    await sleep(1)
  }
}

describe('the users snapshot under faults', () => {
  for (const cut of ['temp file', 'renamed snapshot'] as const) {
    it(`loses no acknowledged write when the process is killed while the snapshot is written (${cut} on disk)`, {
      timeout: 120_000,
    }, async (t) => {
      if (shim.skip !== undefined) return t.skip(shim.skip)
      const { dataDir, later } = await makeWorld(t, 'snapshot-cut-')
      const acked: Acked = { users: new Map(), deleted: [] }
      // Every fsync takes 400 ms: the kill lands inside the snapshot's own file or directory sync.
      const slow = await start({ dataDir, env: shimEnv(shim.library, { syncDelayMs: 400 }) }, later)
      await writeSome(slow.url, acked)
      slow.proc.kill('SIGTERM')
      await waitForFile(dataDir, (name) =>
        cut === 'temp file' ? SNAPSHOT_TEMP.test(name) : name === SNAPSHOT,
      )
      slow.proc.kill('SIGKILL')
      assert.deepEqual(await slow.exited, { code: null, signal: 'SIGKILL' })

      const next = await start({ dataDir }, later)
      const loaded = logLines(next, 'users loaded')
      if (cut === 'temp file') {
        assert.equal(logLines(next, NOT_USED)[0]?.['reason'], 'missing')
        assert.equal(loaded[0]?.['source'], 'files')
      } else {
        // Whole before its rename (fsynced): the stop had nothing left to do but its directory.
        assert.equal(loaded[0]?.['source'], 'snapshot')
      }
      assert.deepEqual(snapshotFiles(dataDir), [], 'the start left a snapshot or its temp file')
      await assertServes(next.url, acked)
      await writeSome(next.url, acked, 2)
      await assertServes(next.url, acked)
    })
  }

  it('reads the files after a kill, even with an older snapshot put back, and serves every acknowledged write', {
    timeout: 120_000,
  }, async (t) => {
    const { root, dataDir, later } = await makeWorld(t, 'snapshot-kill-')
    const acked: Acked = { users: new Map(), deleted: [] }
    const first = await start({ dataDir }, later)
    await writeSome(first.url, acked)
    assert.deepEqual(await first.stop('SIGTERM'), { code: 0, signal: null })
    const kept = path.join(root, 'old-snapshot')
    copyFileSync(path.join(dataDir, SNAPSHOT), kept)

    const second = await start({ dataDir, env: { CHECKPOINT_MS: '3600000' } }, later)
    assert.equal(logLines(second, 'users loaded')[0]?.['source'], 'snapshot')
    await writeSome(second.url, acked)
    // Killed with a tail in the log past its checkpoint: no snapshot is written.
    assert.deepEqual(await second.stop('SIGKILL'), { code: null, signal: 'SIGKILL' })
    assert.deepEqual(snapshotFiles(dataDir), [])

    copyFileSync(kept, path.join(dataDir, SNAPSHOT))
    const third = await start({ dataDir }, later)
    assert.equal(logLines(third, NOT_USED)[0]?.['reason'], 'older than the files')
    assert.equal(logLines(third, 'users loaded')[0]?.['source'], 'files')
    assert.ok(logLines(third, 'replayed the event log past its checkpoint').length > 0)
    await assertServes(third.url, acked)
  })

  for (const kind of ['file', 'dir'] as const) {
    it(`stops cleanly without a snapshot when the snapshot's ${kind === 'file' ? 'file' : 'directory'} fsync fails, and the next start reads every file`, {
      timeout: 120_000,
    }, async (t) => {
      if (shim.skip !== undefined) return t.skip(shim.skip)
      const { root, dataDir, later } = await makeWorld(t, 'snapshot-fsync-')
      const marker = path.join(root, 'fail-fsync')
      const acked: Acked = { users: new Map(), deleted: [] }
      const child = await start(
        {
          dataDir,
          env: {
            CHECKPOINT_MS: '20',
            ...shimEnv(shim.library, {
              failMarker: marker,
              failKind: kind,
              // The snapshot's temp file; for directories, the data directory (and, past the
              // last checkpoint, nothing else is synced under it).
              failUnder: kind === 'file' ? path.join(dataDir, '.snapshot') : dataDir,
            }),
          },
        },
        later,
      )
      await writeSome(child.url, acked)
      // Every change checkpointed, so that only the snapshot's own fsyncs remain at stop.
      await checkpointsOver(child.url)
      writeFileSync(marker, '')
      assert.deepEqual(await child.stop('SIGTERM'), { code: 0, signal: null }, child.stderr())
      assert.equal(
        logLines(child, 'could not write the users snapshot; the next start reads every user file')
          .length,
        1,
      )
      assert.equal(logLines(child, 'users snapshot written').length, 0)
      assert.deepEqual(snapshotFiles(dataDir), [], 'a snapshot a start would use was left')

      const next = await start({ dataDir }, later)
      assert.equal(logLines(next, NOT_USED)[0]?.['reason'], 'missing')
      assert.equal(logLines(next, 'users loaded')[0]?.['source'], 'files')
      await assertServes(next.url, acked)
      assert.ok(existsSync(path.join(dataDir, 'checkpoint.json')))
    })
  }
})
