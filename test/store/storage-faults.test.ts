import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { constants } from 'node:os'
import path from 'node:path'
import { describe, it } from 'node:test'

import type { ChangeEvent } from '../../src/domain/event.js'
import type { User } from '../../src/domain/user.js'
import {
  type ChildOptions,
  LOADED_LINE,
  type RunningChild,
  startChild,
  waitForOutput,
} from '../helpers/child.js'
import { listLockFiles, readUserFile } from '../helpers/data-files.js'
import { assertProblem, request, type TestResponse, type UserPage } from '../helpers/http.js'
import { holdRequest, waitFor } from '../helpers/ops.js'
import { uniqueEmail } from '../helpers/service.js'
import { makeUser, toContractJson } from '../helpers/store-users.js'
import { compileShim, shimEnv } from '../helpers/syscall-shim.js'
import {
  fillDisk,
  type Later,
  makeWorld,
  remountReadOnly,
  tmpfsWorld,
} from '../helpers/tmpfs-world.js'
import { makeToken } from '../helpers/tokens.js'

const token = makeToken()
const feedToken = makeToken({ scope: 'events:read' })
const shim = compileShim()

/** Starts the service, and waits for the log lines of its load. */
async function start(options: ChildOptions, later: Later): Promise<RunningChild> {
  const child = await startChild(options)
  later(() => child.stop('SIGKILL'))
  await waitForOutput(child, LOADED_LINE)
  return child
}

/** SIGTERM, and the clean exit the contract asks for (exit code 0) whatever the disk did. */
async function stopCleanly(child: RunningChild): Promise<void> {
  const exit = await child.stop('SIGTERM')
  assert.deepEqual(
    exit,
    { code: 0, signal: null },
    `the service did not stop cleanly:\n${child.stderr()}`,
  )
}

/** What the API shows: every user (following nextCursor), and the answer for each id asked about. */
async function readView(
  url: string,
  ids: readonly string[] = [],
): Promise<{ users: User[]; items: Record<string, string> }> {
  const users: User[] = []
  let cursor: string | null = null
  do {
    const query: string = cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`
    const res = await request('GET', `${url}/users?limit=100${query}`, { token })
    assert.equal(res.status, 200, res.text)
    const page = res.json<UserPage>()
    users.push(...page.items)
    cursor = page.nextCursor
  } while (cursor !== null)
  users.sort((a, b) => (a.id < b.id ? -1 : 1))
  const items: Record<string, string> = {}
  for (const id of ids) {
    const res = await request('GET', `${url}/users/${id}`, { token })
    // A problem's requestId differs from answer to answer; everything else must not.
    const body = res.text.replace(/"requestId":"[^"]*"/, '')
    items[id] = `${res.status} ${res.headers.get('etag') ?? ''} ${body}`
  }
  return { users, items }
}

const createUser = (url: string, email = uniqueEmail('fault')): Promise<TestResponse> =>
  request('POST', `${url}/users`, { token, json: { email, name: 'Storage Fault' } })

const patchUser = (url: string, id: string, name: string): Promise<TestResponse> =>
  request('PATCH', `${url}/users/${id}`, { token, json: { name } })

async function created(url: string): Promise<User> {
  const res = await createUser(url)
  assert.equal(res.status, 201, res.text)
  return res.json<User>()
}

/** A 503 storage_unavailable with a Retry-After; returns the problem's detail. */
function assertStorageUnavailable(res: TestResponse): string {
  const problem = assertProblem(res, 503, 'storage_unavailable')
  assert.match(
    res.headers.get('retry-after') ?? '',
    /^\d+$/,
    'a 503 storage_unavailable needs Retry-After',
  )
  return problem.detail
}

async function readiness(url: string): Promise<TestResponse> {
  return request('GET', `${url}/readyz`)
}

/** The whole change feed, as GET /events shows it (ids, types, users and versions). */
async function readFeed(url: string): Promise<string[]> {
  const res = await request('GET', `${url}/events?limit=1000`, { token: feedToken })
  assert.equal(res.status, 200, res.text)
  return res
    .json<{ items: ChangeEvent[] }>()
    .items.map((event) => `${event.id} ${event.type} ${event.userId} v${event.version}`)
}

/** The event id `DATA_DIR/checkpoint.json` names, or undefined when there is none. */
function readCheckpoint(dataDir: string): string | undefined {
  try {
    const text = readFileSync(path.join(dataDir, 'checkpoint.json'), 'utf8')
    return (JSON.parse(text) as { through: string }).through
  } catch {
    return undefined
  }
}

/** The names in a directory that are user files or leftover temp files. */
function listFiles(dir: string): string[] {
  try {
    return readdirSync(dir).sort()
  } catch {
    return []
  }
}

/** The child's log lines at this level, parsed, in order. */
function logLines(child: RunningChild, level: string): Record<string, unknown>[] {
  return child
    .stdout()
    .split('\n')
    .filter((line) => line.includes(`"level":"${level}"`))
    .map((line) => JSON.parse(line) as Record<string, unknown>)
}

/** The fields of the child's "users loaded" log lines, in order. */
function loadedLines(child: RunningChild): Record<string, unknown>[] {
  return child
    .stdout()
    .split('\n')
    .filter((line) => line.includes('"users loaded"'))
    .map((line) => JSON.parse(line) as Record<string, unknown>)
}

describe('storage faults, through a running service and a restart', () => {
  it("answers 503 storage_unavailable when the fdatasync of the change's event in the log fails, keeps nothing of it, not even after a restart, and turns read-only until a restart", {
    timeout: 60_000,
  }, async (t) => {
    if (shim.skip !== undefined) return t.skip(shim.skip)
    const { root, dataDir, later } = await makeWorld(t)
    const marker = path.join(root, 'fail-fsync')
    // Only the log's fdatasync fails, once (the void of the refused event that follows works), and
    // with ENOSPC rather than EIO: the failed sync itself, not its errno nor a failed void, makes
    // the store read-only.
    const env = shimEnv(shim.library, {
      failMarker: marker,
      failKind: 'file',
      failErrno: constants.errno.ENOSPC,
      failUnder: path.join(dataDir, 'events'),
      failOnce: true,
    })
    const child = await start({ dataDir, env }, later)
    const kept = await created(child.url)
    assert.equal((await patchUser(child.url, kept.id, 'Second Version')).status, 200)
    const before = await readView(child.url, [kept.id])
    const feedBefore = await readFeed(child.url)
    assert.equal(feedBefore.length, 2)

    writeFileSync(marker, '')
    const email = uniqueEmail('lost')
    const refused = await createUser(child.url, email)
    assertStorageUnavailable(refused)
    assert.equal(existsSync(marker), false, "the log's fdatasync failed")
    assert.deepEqual(
      listFiles(path.join(dataDir, 'users')),
      [`${kept.id}.json`],
      'no new file and no temp file is left behind',
    )
    const fault = await waitFor('the fault logged', () => logLines(child, 'error')[0])
    assert.deepEqual(
      [fault['msg'], fault['step'], fault['syscall'], fault['errno']],
      ['storage fault', 'file-sync', 'fdatasync', 'ENOSPC'],
    )

    // The sync failed once: the store trusts the disk no more, even with fdatasync working again.
    const ready = await readiness(child.url)
    assert.match(assertStorageUnavailable(ready), /restart/)
    assertStorageUnavailable(await createUser(child.url))
    assertStorageUnavailable(await patchUser(child.url, kept.id, 'Third Version'))
    assertStorageUnavailable(await request('DELETE', `${child.url}/users/${kept.id}`, { token }))
    const after = await readView(child.url, [kept.id])
    assert.deepEqual(after, before, 'reads are still served and show nothing of the refused writes')
    assert.equal(
      (
        await request('GET', `${child.url}/users?email=${encodeURIComponent(email)}`, { token })
      ).json<UserPage>().items.length,
      0,
    )
    assert.deepEqual(await readFeed(child.url), feedBefore, 'the feed shows no refused change')
    await stopCleanly(child)
    assert.equal(logLines(child, 'error').length, 1, `logged once:\n${child.stdout()}`)

    // The refused event's record reached the log file (only its sync failed): the replay at start
    // must leave it out, as its void says.
    const restarted = await start({ dataDir }, later)
    assert.deepEqual(
      await readView(restarted.url, [kept.id]),
      before,
      'a restart shows what the API showed: the refused change was not replayed from the log',
    )
    assert.deepEqual(await readFeed(restarted.url), feedBefore, 'nor does its feed')
    assert.deepEqual(listFiles(path.join(dataDir, 'users')), [`${kept.id}.json`], 'nor its disk')
    assert.equal((await readiness(restarted.url)).status, 200, 'a restart ends read-only')
    assert.equal(
      (await createUser(restarted.url, email)).status,
      201,
      'the refused email was never taken',
    )
  })

  it("keeps an acknowledged change in memory and after a restart when a checkpoint's fsync of its file or of its directory fails, and turns read-only with an error line", {
    timeout: 60_000,
  }, async (t) => {
    if (shim.skip !== undefined) return t.skip(shim.skip)
    const library = shim.library
    const { root, dataDir, later } = await makeWorld(t)
    const marker = path.join(root, 'fail-fsync')
    const usersDir = path.join(dataDir, 'users')
    /** A service checkpointing every 20 ms, whose fsyncs of this kind under `under` fail on demand. */
    const startFailing = (
      failKind: 'file' | 'dir',
      under: string,
      failErrno?: number,
    ): Promise<RunningChild> =>
      start(
        {
          dataDir,
          env: {
            CHECKPOINT_MS: '20',
            ...shimEnv(library, {
              failMarker: marker,
              failKind,
              failUnder: under,
              ...(failErrno === undefined ? {} : { failErrno }),
            }),
          },
        },
        later,
      )
    /**
     * Sends one change while the fsyncs fail: once a checkpoint covers every change before it, so
     * that the change is all the next checkpoint has to sync. The change is acknowledged (its event
     * is durable in the log); the checkpoint that follows fails and turns the store read-only,
     * logs why at error, and never moves checkpoint.json. Returns the answer and the checkpoint.
     */
    const underFailingCheckpoint = async (
      child: RunningChild,
      send: () => Promise<TestResponse>,
      fault: { step: string; code: string },
    ): Promise<{ res: TestResponse; through: string }> => {
      const through = await waitFor(
        'a checkpoint through the last event',
        async () => {
          const last = (await readFeed(child.url)).at(-1)?.split(' ')[0]
          return last !== undefined && readCheckpoint(dataDir) === last ? last : undefined
        },
        10_000,
      )
      writeFileSync(marker, '')
      const res = await send()
      await waitFor(
        'a checkpoint to fail and the store to turn read-only',
        async () => ((await readiness(child.url)).status === 503 ? true : undefined),
        10_000,
      )
      rmSync(marker)
      assert.match(assertStorageUnavailable(await readiness(child.url)), /restart/)
      const line = await waitFor('the error line', () => logLines(child, 'error')[0])
      assert.deepEqual(
        [line['msg'], line['step'], line['code']],
        ['a checkpoint failed: the store turned read-only', fault.step, fault.code],
      )
      assert.equal(readCheckpoint(dataDir), through, 'the failed checkpoint claimed the change')
      return { res, through }
    }
    /** After a restart: the change came back through the replay of the log past the checkpoint. */
    const assertReplayed = (child: RunningChild): void => {
      // start() waited for the load's last line: the replay's came before it.
      const replayed = logLines(child, 'info').find(
        (line) => line['msg'] === 'replayed the event log past its checkpoint',
      )
      assert.equal(replayed?.['events'], 1, 'the replay took the change past the checkpoint')
    }

    // A replace, then the checkpoint's fsync of the user file fails (with ENOSPC: a failed fsync
    // is a failed fsync whatever its errno).
    const first = await startFailing('file', usersDir, constants.errno.ENOSPC)
    const user = await created(first.url)
    const patched = await underFailingCheckpoint(
      first,
      () => patchUser(first.url, user.id, 'Acknowledged Before The Checkpoint'),
      { step: 'file-sync', code: 'ENOSPC' },
    )
    assert.equal(patched.res.status, 200, patched.res.text)
    const shown = await request('GET', `${first.url}/users/${user.id}`, { token })
    assert.equal(shown.status, 200)
    assert.equal(shown.json<User>().version, 2)
    assert.equal(shown.json<User>().name, 'Acknowledged Before The Checkpoint')
    assert.equal(readUserFile(dataDir, user.id)?.['version'], 2, 'the disk holds version 2')
    const lateEmail = uniqueEmail('late')
    assertStorageUnavailable(await createUser(first.url, lateEmail))
    const beforeFirst = await readView(first.url, [user.id])
    const feedFirst = await readFeed(first.url)
    assert.equal(beforeFirst.users.length, 1, 'a write refused while read-only is not applied')
    assert.equal(feedFirst.length, 2)
    await stopCleanly(first)
    assert.equal(readCheckpoint(dataDir), patched.through, 'the stop did not checkpoint either')
    // What the failed fsync may have lost in a power loss: the new version's data. Only the log,
    // replayed from the checkpoint, can bring it back.
    writeFileSync(path.join(usersDir, `${user.id}.json`), '')

    // A create, then the checkpoint's fsync of users/ fails (EIO).
    const second = await startFailing('dir', usersDir)
    assertReplayed(second)
    assert.deepEqual(await readView(second.url, [user.id]), beforeFirst)
    assert.deepEqual(await readFeed(second.url), feedFirst)
    const email = uniqueEmail('applied')
    const made = await underFailingCheckpoint(second, () => createUser(second.url, email), {
      step: 'dir-sync',
      code: 'EIO',
    })
    assert.equal(made.res.status, 201, made.res.text)
    const applied = made.res.json<User>()
    assert.equal((await request('GET', `${second.url}/users/${applied.id}`, { token })).status, 200)
    assert.equal(readUserFile(dataDir, applied.id)?.['email'], email)
    // Read-only now, so the same email is refused for storage, never as a duplicate of a ghost.
    assertStorageUnavailable(await createUser(second.url, email))
    const beforeSecond = await readView(second.url, [user.id, applied.id])
    const feedSecond = await readFeed(second.url)
    assert.equal(beforeSecond.users.length, 2)
    assert.equal(feedSecond.length, 3)
    await stopCleanly(second)
    // What the failed directory fsync may have lost: the new file's name.
    rmSync(path.join(usersDir, `${applied.id}.json`))

    // A delete, then the checkpoint's fsync of tombstones/ fails (EIO).
    const third = await startFailing('dir', path.join(dataDir, 'tombstones'))
    assertReplayed(third)
    assert.deepEqual(
      await readView(third.url, [user.id, applied.id]),
      beforeSecond,
      'no user vanished and none was added',
    )
    assert.deepEqual(await readFeed(third.url), feedSecond)
    assert.equal(
      loadedLines(third)[0]?.['quarantined'],
      0,
      'no duplicate-email file was quarantined',
    )
    assert.equal(existsSync(path.join(dataDir, 'quarantine')), false)
    const removed = await underFailingCheckpoint(
      third,
      () => request('DELETE', `${third.url}/users/${user.id}`, { token }),
      { step: 'dir-sync', code: 'EIO' },
    )
    assert.equal(removed.res.status, 204, removed.res.text)
    assert.equal((await request('GET', `${third.url}/users/${user.id}`, { token })).status, 404)
    assert.equal(readUserFile(dataDir, user.id), undefined, 'the user file is gone from disk')
    assert.equal(readUserFile(dataDir, user.id, 'tombstones')?.['id'], user.id)
    const beforeThird = await readView(third.url, [user.id, applied.id])
    const feedThird = await readFeed(third.url)
    assert.equal(beforeThird.users.length, 1)
    assert.equal(feedThird.length, 4)
    await stopCleanly(third)
    // What the failed directory fsync may have lost: the tombstone's name.
    rmSync(path.join(dataDir, 'tombstones', `${user.id}.json`))

    const fourth = await start({ dataDir }, later)
    assertReplayed(fourth)
    assert.deepEqual(
      await readView(fourth.url, [user.id, applied.id]),
      beforeThird,
      'the delete held',
    )
    assert.deepEqual(await readFeed(fourth.url), feedThird)
    assert.equal(readUserFile(dataDir, user.id, 'tombstones')?.['id'], user.id, 'the tombstone too')
    assert.equal((await readiness(fourth.url)).status, 200, 'a restart ends read-only')
    assert.equal((await createUser(fourth.url, lateEmail)).status, 201, 'writes work again')
  })

  it('answers 503 storage_unavailable on a full disk, is not ready until a write succeeds, then takes writes again', {
    timeout: 60_000,
  }, async (t) => {
    const world = await tmpfsWorld(t)
    if (typeof world === 'string') return t.skip(world)
    const { mount, dataDir, later } = world
    const child = await start({ dataDir }, later)
    const kept = await created(child.url)
    const before = await readView(child.url, [kept.id])

    const filler = path.join(mount, 'filler')
    fillDisk(filler)
    const email = uniqueEmail('full')
    const detail = assertStorageUnavailable(await createUser(child.url, email))
    assert.doesNotMatch(detail, /restart/, 'a full disk is not a failed fsync: no read-only')
    assert.deepEqual(
      listFiles(path.join(dataDir, 'users')),
      [`${kept.id}.json`],
      'no new file and no temp file is left behind',
    )
    assertStorageUnavailable(await readiness(child.url))
    assert.deepEqual(
      await readView(child.url, [kept.id]),
      before,
      'reads still work and show nothing new',
    )

    rmSync(filler)
    const res = await createUser(child.url, email)
    assert.equal(res.status, 201, `a write succeeds again once space is freed: ${res.text}`)
    assert.equal(
      (await readiness(child.url)).status,
      200,
      'a successful write makes the service ready again',
    )
    const added = res.json<User>()
    const after = await readView(child.url, [kept.id, added.id])
    assert.equal(after.users.length, 2)
    await stopCleanly(child)

    const restarted = await start({ dataDir }, later)
    assert.deepEqual(await readView(restarted.url, [kept.id, added.id]), after)
  })

  it('cuts off the log the part of a batch a full disk took, so that the next event, once there is room, is whole and survives a kill', {
    timeout: 60_000,
  }, async (t) => {
    const world = await tmpfsWorld(t)
    if (typeof world === 'string') return t.skip(world)
    const { mount, dataDir, later } = world
    // No checkpoint: after the kill, only the log can bring the last user back.
    const env = { CHECKPOINT_MS: '3600000' }
    const child = await start({ dataDir, env }, later)
    const kept = await created(child.url)
    const filler = path.join(mount, 'filler')
    fillDisk(filler)
    // An event far larger than what is left of the segment's last page: the disk takes a part of it.
    const metadata = Object.fromEntries(
      Array.from({ length: 32 }, (_, i) => [`k${i}`, 'x'.repeat(500)]),
    )
    const refusedRes = await request('POST', `${child.url}/users`, {
      token,
      json: { email: uniqueEmail('torn'), name: 'Torn', metadata },
    })
    assertStorageUnavailable(refusedRes)
    const segments = listFiles(path.join(dataDir, 'events')).filter((name) =>
      name.endsWith('.ndjson'),
    )
    const log = segments.map((name) => readFileSync(path.join(dataDir, 'events', name)))
    assert.ok(
      log.every((bytes) => bytes.length === 0 || bytes.at(-1) === 0x0a),
      'no part of the refused event is left in the log',
    )
    rmSync(filler)
    const res = await createUser(child.url)
    assert.equal(res.status, 201, res.text)
    const added = res.json<User>()
    const view = await readView(child.url, [kept.id, added.id])
    await child.stop('SIGKILL')

    const restarted = await start({ dataDir, env }, later)
    assert.deepEqual(await readView(restarted.url, [kept.id, added.id]), view)
    assert.deepEqual(listFiles(path.join(dataDir, 'quarantine')), [], 'no damaged record')
    const loaded = logLines(restarted, 'info').find((line) => line['msg'] === 'events loaded')
    assert.deepEqual(
      { events: loaded?.['events'], damaged: loaded?.['damaged'] },
      { events: 2, damaged: 0 },
    )
  })

  it('answers 503 storage_unavailable on a read-only mount, still serves reads and exits 0 on SIGTERM', {
    timeout: 60_000,
  }, async (t) => {
    const world = await tmpfsWorld(t)
    if (typeof world === 'string') return t.skip(world)
    const { mount, dataDir, later } = world
    const child = await start({ dataDir }, later)
    const kept = await created(child.url)
    const before = await readView(child.url, [kept.id])

    await remountReadOnly(mount)
    later(() => {
      execFileSync('mount', ['-o', 'remount,rw', mount], { stdio: 'ignore' })
    })
    assertStorageUnavailable(await createUser(child.url))
    assertStorageUnavailable(await patchUser(child.url, kept.id, 'Never Written'))
    assertStorageUnavailable(await readiness(child.url))
    assert.deepEqual(
      await readView(child.url, [kept.id]),
      before,
      'reads are served and show nothing new',
    )
    // The lock file cannot be removed on a read-only mount; the stop must stay clean anyway.
    await stopCleanly(child)

    execFileSync('mount', ['-o', 'remount,rw', mount])
    const restarted = await start({ dataDir }, later)
    assert.deepEqual(await readView(restarted.url, [kept.id]), before)
    assert.equal(
      (await createUser(restarted.url)).status,
      201,
      'the stale lock was taken over and writes work',
    )
  })

  it('turns read-only within a few seconds when the data directory is removed, and never writes into the new one', {
    timeout: 60_000,
  }, async (t) => {
    const { dataDir, later } = await makeWorld(t)
    const first = await start({ dataDir }, later)
    const kept = await created(first.url)

    rmSync(dataDir, { recursive: true, force: true })
    await waitFor(
      '/readyz to turn 503',
      async () => ((await readiness(first.url)).status === 503 ? true : undefined),
      10_000,
    )
    assert.match(assertStorageUnavailable(await readiness(first.url)), /restart/)
    assertStorageUnavailable(await createUser(first.url))
    assert.equal(
      (await request('GET', `${first.url}/users/${kept.id}`, { token })).status,
      200,
      'reads are still served from memory',
    )

    // The first process's lock went with the directory, so a second one may own the new directory.
    const second = await start({ dataDir }, later)
    const added = await created(second.url)
    assertStorageUnavailable(await createUser(first.url))
    assertStorageUnavailable(await patchUser(first.url, kept.id, 'Into The New Directory'))
    assert.deepEqual(
      listFiles(path.join(dataDir, 'users')),
      [`${added.id}.json`],
      'the first process wrote nothing into the new directory',
    )
    const locks = listLockFiles(dataDir)
    assert.equal(locks.length, 1)
    await stopCleanly(first)
    assert.deepEqual(
      listLockFiles(dataDir),
      locks,
      "the first process left the second one's lock alone",
    )
    assert.equal((await readiness(second.url)).status, 200)

    const before = await readView(second.url, [kept.id, added.id])
    assert.deepEqual(
      before.users.map((user) => user.id),
      [added.id],
    )
    await stopCleanly(second)
    const restarted = await start({ dataDir }, later)
    assert.deepEqual(await readView(restarted.url, [kept.id, added.id]), before)
  })

  it('refuses a write in flight when maintenance begins with 503 maintenance, and writes no file', {
    timeout: 60_000,
  }, async (t) => {
    const { dataDir, later } = await makeWorld(t)
    // One request in flight is then enough to make /readyz say overloaded: the sign that the held
    // POST has passed the refusals made when a request arrives.
    const child = await start({ dataDir, env: { MAX_INFLIGHT: '1' } }, later)
    const kept = await created(child.url)
    const before = await readView(child.url, [kept.id])

    const email = uniqueEmail('maintenance')
    const held = holdRequest(child.url, {
      path: '/users',
      token,
      body: JSON.stringify({ email, name: 'In Flight' }),
    })
    later(() => {
      held.abort()
    })
    await waitFor(
      'the held POST to count as in flight',
      async () => {
        const res = await readiness(child.url)
        return res.status === 503 && res.json<{ code: string }>().code === 'overloaded'
          ? true
          : undefined
      },
      10_000,
    )
    const maintenanceFile = path.join(dataDir, 'maintenance')
    writeFileSync(maintenanceFile, '')
    await waitFor(
      '/readyz to say maintenance',
      async () => {
        const res = await readiness(child.url)
        return res.status === 503 && res.json<{ code: string }>().code === 'maintenance'
          ? true
          : undefined
      },
      10_000,
    )
    held.finish()
    const answer = await held.response
    assert.equal(answer.status, 503, answer.text)
    assert.equal((JSON.parse(answer.text) as { code: string }).code, 'maintenance')
    assert.match(String(answer.headers['retry-after']), /^\d+$/)
    assert.deepEqual(
      listFiles(path.join(dataDir, 'users')),
      [`${kept.id}.json`],
      'no user file was written',
    )

    rmSync(maintenanceFile)
    await waitFor(
      '/readyz to be 200 again',
      async () => ((await readiness(child.url)).status === 200 ? true : undefined),
      10_000,
    )
    assert.deepEqual(await readView(child.url, [kept.id]), before)
    await stopCleanly(child)
    const restarted = await start({ dataDir }, later)
    assert.deepEqual(await readView(restarted.url, [kept.id]), before)
    assert.equal(
      (await createUser(restarted.url, email)).status,
      201,
      'the refused email was never taken',
    )
  })

  it('refuses a keyed request in flight that changes nothing when maintenance begins: no key file', {
    timeout: 60_000,
  }, async (t) => {
    const { dataDir, later } = await makeWorld(t)
    const child = await start({ dataDir, env: { MAX_INFLIGHT: '1' } }, later)
    const kept = await created(child.url)
    const keysDir = path.join(dataDir, 'keys')
    const keyFiles = (): string[] => readdirSync(keysDir).sort()
    const filesBefore = keyFiles()

    // A patch that changes nothing: its key alone would be kept, in a journal of keys/.
    const held = holdRequest(child.url, {
      method: 'PATCH',
      path: `/users/${kept.id}`,
      token,
      body: JSON.stringify({ name: kept.name }),
      headers: { 'idempotency-key': '"unchanged-in-maintenance"' },
    })
    later(() => {
      held.abort()
    })
    const readyzSays = (code: string) => async (): Promise<true | undefined> => {
      const res = await readiness(child.url)
      return res.status === 503 && res.json<{ code: string }>().code === code ? true : undefined
    }
    await waitFor('the held PATCH to count as in flight', readyzSays('overloaded'), 10_000)
    const maintenanceFile = path.join(dataDir, 'maintenance')
    writeFileSync(maintenanceFile, '')
    await waitFor('/readyz to say maintenance', readyzSays('maintenance'), 10_000)
    held.finish()
    const answer = await held.response
    assert.equal(answer.status, 503, answer.text)
    assert.equal((JSON.parse(answer.text) as { code: string }).code, 'maintenance')
    assert.deepEqual(keyFiles(), filesBefore, 'no key was written in maintenance')
    rmSync(maintenanceFile)
    await stopCleanly(child)
  })

  it('counts every quarantined file, torn and duplicate-email alike, in the "users loaded" line', {
    timeout: 60_000,
  }, async (t) => {
    const { dataDir, later } = await makeWorld(t)
    const usersDir = path.join(dataDir, 'users')
    mkdirSync(usersDir, { recursive: true })
    const torn = makeUser()
    const older = makeUser()
    const newer = makeUser({ email: older.email.toUpperCase() })
    assert.ok(older.id < newer.id)
    writeFileSync(path.join(usersDir, `${torn.id}.json`), toContractJson(torn).slice(0, 40))
    writeFileSync(path.join(usersDir, `${older.id}.json`), toContractJson(older))
    writeFileSync(path.join(usersDir, `${newer.id}.json`), toContractJson(newer))

    const child = await start({ dataDir }, later)
    const loaded = loadedLines(child)
    assert.equal(loaded.length, 1, child.stdout())
    assert.equal(loaded[0]?.['quarantined'], 2, 'the torn file and the duplicate both count')
    assert.equal(loaded[0]?.['users'], 1)
    assert.deepEqual(
      listFiles(path.join(dataDir, 'quarantine')),
      [`${torn.id}.json`, `${newer.id}.json`].sort(),
    )
    assert.deepEqual(listFiles(usersDir), [`${older.id}.json`])
    const ids = [torn.id, older.id, newer.id]
    const before = await readView(child.url, ids)
    assert.deepEqual(
      before.users.map((user) => user.id),
      [older.id],
      'the older user keeps the email',
    )
    await stopCleanly(child)

    const restarted = await start({ dataDir }, later)
    assert.deepEqual(await readView(restarted.url, ids), before)
    assert.equal(loadedLines(restarted)[0]?.['quarantined'], 0, 'nothing is left to quarantine')
  })
})
