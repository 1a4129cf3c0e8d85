import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import {
  existsSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import type { User } from '../../../src/domain/user.js'
import { assertProblem } from '../../helpers/http.js'
import { makeTempDir, startService, type TestService } from '../../helpers/service.js'
import { makeToken } from '../../helpers/tokens.js'

const SNAPSHOT = 'snapshot'
const NOT_USED = 'the users snapshot was not used; reading every user file'

/** What a client sees of the store: every user with its ETag, the deleted ones, the feed. */
interface Seen {
  readonly users: User[]
  readonly etags: Map<string, string>
  readonly deleted: string[]
  /** Undefined: not compared (a user file removed by hand voids its events at load). */
  readonly feed: unknown
}

/** A service with users of every kind: metadata, non-ASCII, patched, revoked, deleted. */
async function populate(svc: TestService): Promise<string[]> {
  await svc.createUser({ email: 'plain@example.com', name: 'Plain' })
  await svc.createUser({
    email: 'Mixed.Case@Example.com',
    name: 'Zoë ✓ "quoted" \\ back',
    metadata: { plan: 'pro', region: 'Zürich — 東京' },
  })
  const patched = await svc.createUser({ email: 'patched@example.com' })
  const res = await svc.call('PATCH', `/users/${patched.id}`, { json: { name: 'Patched Twice' } })
  assert.equal(res.status, 200, res.text)
  const revoked = await svc.createUser({ email: 'revoked@example.com' })
  const revoke = await svc.call('POST', `/users/${revoked.id}:revokeTokens`)
  assert.equal(revoke.status, 200, revoke.text)
  const gone = await svc.createUser({ email: 'gone@example.com' })
  assert.equal((await svc.call('DELETE', `/users/${gone.id}`)).status, 204)
  return [gone.id]
}

async function observe(svc: TestService, deleted: readonly string[]): Promise<Seen> {
  const users = await svc.snapshot()
  const etags = new Map<string, string>()
  for (const user of users) {
    const res = await svc.call('GET', `/users/${user.id}`)
    assert.equal(res.status, 200, res.text)
    etags.set(user.id, res.headers.get('etag') ?? '')
  }
  const feed = await svc.call('GET', '/events?limit=1000', {
    token: makeToken({ scope: 'events:read' }),
  })
  assert.equal(feed.status, 200, feed.text)
  return { users, etags, deleted: [...deleted], feed: feed.json() }
}

/** Asserts the service shows exactly `seen`: users, ETags, deleted ids, feed, email uniqueness. */
async function assertSame(svc: TestService, seen: Seen): Promise<void> {
  const now = await observe(svc, seen.deleted)
  assert.deepEqual(now.users, seen.users)
  assert.deepEqual(now.etags, seen.etags)
  if (seen.feed !== undefined) assert.deepEqual(now.feed, seen.feed)
  for (const id of seen.deleted) {
    assertProblem(await svc.call('GET', `/users/${id}`), 404, 'not_found')
    // The tombstone outlives the user: a token of the deleted subject stays refused.
    const res = await svc.call('GET', `/users/${id}`, { token: makeToken({ sub: id }) })
    assertProblem(res, 403, 'subject_deleted')
  }
  // Email uniqueness, compared case-insensitively, holds for every user loaded.
  for (const user of seen.users) {
    const res = await svc.call('POST', '/users', {
      json: { email: user.email.toUpperCase(), name: 'Copy' },
    })
    assertProblem(res, 409, 'duplicate_email')
  }
  assert.deepEqual(await svc.snapshot(), seen.users, 'a refused create changed the users')
}

function loadedFrom(svc: TestService): unknown {
  return svc.logs.find((line) => line['msg'] === 'users loaded')?.['source']
}

function missReason(svc: TestService): unknown {
  return svc.logs.find((line) => line['msg'] === NOT_USED)?.['reason']
}

/** The running service, stopped cleanly (as SIGTERM does); the test's own close finds it closed. */
async function stop(svc: TestService): Promise<void> {
  await svc.service.close()
}

/** A data directory with users of every kind, stopped cleanly: its snapshot is written. */
async function stoppedWithSnapshot(t: TestContext): Promise<{ dataDir: string; seen: Seen }> {
  const dataDir = path.join(await makeTempDir(t), 'data')
  const svc = await startService(t, { dataDir })
  const deleted = await populate(svc)
  const seen = await observe(svc, deleted)
  await stop(svc)
  assert.ok(existsSync(path.join(dataDir, SNAPSHOT)), 'a clean stop wrote no snapshot')
  return { dataDir, seen }
}

/** The snapshot's lines (header, users, tombstones, digest) and a writer that signs them again. */
function snapshotLines(dataDir: string): string[] {
  return readFileSync(path.join(dataDir, SNAPSHOT), 'utf8').split('\n').slice(0, -1)
}

function writeSigned(dataDir: string, lines: readonly string[]): void {
  const body = `${lines.join('\n')}\n`
  const digest = createHash('sha1').update(body).digest('hex')
  writeFileSync(path.join(dataDir, SNAPSHOT), `${body}{"sha1":"${digest}"}\n`)
}

function userFile(dataDir: string, id: string): string {
  return path.join(dataDir, 'users', `${id}.json`)
}

describe('the users snapshot of the file store', () => {
  it('is written at a clean stop and read by the next start, which serves the same users, ETags, versions, emails, tombstones and feed', async (t) => {
    const { dataDir, seen } = await stoppedWithSnapshot(t)
    const file = path.join(dataDir, SNAPSHOT)
    assert.equal(statSync(file).mode & 0o777, 0o600)
    const lines = snapshotLines(dataDir)
    // One line per user, holding exactly its file's bytes, then the tombstones.
    for (const user of seen.users)
      assert.ok(lines.includes(readFileSync(userFile(dataDir, user.id), 'utf8')), user.id)
    assert.equal(lines.length, 1 + seen.users.length + seen.deleted.length + 1)

    const svc = await startService(t, { dataDir })
    assert.equal(loadedFrom(svc), 'snapshot')
    assert.equal(existsSync(file), false, 'the snapshot outlived the start that read it')
    await assertSame(svc, seen)
    // Writes go on as before: a new user, then a change of a loaded one.
    const added = await svc.createUser({ email: 'after@example.com' })
    const first = seen.users[0]
    assert.ok(first !== undefined)
    const res = await svc.call('PATCH', `/users/${first.id}`, {
      json: { name: 'Changed' },
      headers: { 'if-match': seen.etags.get(first.id) ?? '' },
    })
    assert.equal(res.status, 200, res.text)
    assert.equal(res.headers.get('etag'), `"v${first.version + 1}"`)
    const after = await observe(svc, seen.deleted)
    await stop(svc)

    const again = await startService(t, { dataDir })
    assert.equal(loadedFrom(again), 'snapshot')
    assert.deepEqual(await again.getUser(added.id), added)
    await assertSame(again, after)
  })

  it('is not there after a start that read it, so that a start after a crash reads the files', async (t) => {
    const { dataDir, seen } = await stoppedWithSnapshot(t)
    const svc = await startService(t, { dataDir })
    assert.equal(loadedFrom(svc), 'snapshot')
    // Another process starting now (after a crash of this one) finds no snapshot.
    assert.equal(existsSync(path.join(dataDir, SNAPSHOT)), false)
    assert.deepEqual(
      readdirSync(dataDir).filter((name) => name.includes('snapshot')),
      [],
    )
    await assertSame(svc, seen)
  })

  const misses: {
    readonly name: string
    readonly reason: string
    /** Changes the stopped data directory; returns the data directory to start on. */
    readonly change: (dataDir: string, seen: Seen) => string
    /** What the start must show, from what the stop showed. */
    readonly expect?: (seen: Seen, dataDir: string) => Seen
  }[] = [
    {
      name: 'missing',
      reason: 'missing',
      change: (dataDir) => {
        unlinkSync(path.join(dataDir, SNAPSHOT))
        return dataDir
      },
    },
    {
      name: 'with a byte flipped',
      reason: 'damaged',
      change: (dataDir) => {
        const file = path.join(dataDir, SNAPSHOT)
        const bytes = readFileSync(file)
        const at = Math.floor(bytes.length / 2)
        bytes[at] = (bytes[at] ?? 0) ^ 0x01
        writeFileSync(file, bytes)
        return dataDir
      },
    },
    {
      name: 'truncated',
      reason: 'damaged',
      change: (dataDir) => {
        const file = path.join(dataDir, SNAPSHOT)
        writeFileSync(file, readFileSync(file).subarray(0, -70))
        return dataDir
      },
    },
    {
      name: 'with a wrong digest',
      reason: 'damaged',
      change: (dataDir) => {
        const lines = snapshotLines(dataDir)
        lines[lines.length - 1] = `{"sha1":"${'0'.repeat(40)}"}`
        writeFileSync(path.join(dataDir, SNAPSHOT), `${lines.join('\n')}\n`)
        return dataDir
      },
    },
    {
      name: 'signed but holding a line that is not a user',
      reason: 'damaged',
      change: (dataDir) => {
        const lines = snapshotLines(dataDir).slice(0, -1)
        lines[2] = (lines[2] ?? '').replace('"version":', '"version":"x","was":')
        writeSigned(dataDir, lines)
        return dataDir
      },
    },
    {
      // Its user is valid, but the line is not what the store writes: it would be served as is.
      name: 'signed but holding a user line with a field the store never writes',
      reason: 'damaged',
      change: (dataDir) => {
        const lines = snapshotLines(dataDir).slice(0, -1)
        lines[2] = (lines[2] ?? '').replace(/\}$/, ',"role":"admin"}')
        writeSigned(dataDir, lines)
        return dataDir
      },
    },
    {
      name: 'signed but giving two users one email (the load leaves memory as it was)',
      reason: 'damaged',
      change: (dataDir) => {
        const lines = snapshotLines(dataDir).slice(0, -1)
        const second = JSON.parse(lines[2] ?? '') as User
        lines[2] = JSON.stringify({ ...second, email: 'PLAIN@example.com' })
        writeSigned(dataDir, lines)
        return dataDir
      },
    },
    {
      name: 'older than a user file added while stopped',
      reason: 'older than the files',
      change: (dataDir, seen) => {
        const user = { ...(seen.users[0] as User), id: '01900000-0000-7000-8000-000000000001' }
        writeFileSync(
          userFile(dataDir, user.id),
          JSON.stringify({ ...user, email: 'added@example.com' }),
        )
        return dataDir
      },
      expect: (seen, dataDir) => ({
        ...seen,
        users: [
          JSON.parse(
            readFileSync(userFile(dataDir, '01900000-0000-7000-8000-000000000001'), 'utf8'),
          ),
          ...seen.users,
        ],
        etags: new Map([['01900000-0000-7000-8000-000000000001', '"v1"'], ...seen.etags]),
      }),
    },
    {
      name: 'older than a user file removed while stopped',
      reason: 'older than the files',
      change: (dataDir, seen) => {
        unlinkSync(userFile(dataDir, (seen.users[0] as User).id))
        return dataDir
      },
      expect: (seen) => {
        const [first, ...rest] = seen.users
        const etags = new Map(seen.etags)
        etags.delete((first as User).id)
        return { ...seen, users: rest, etags, feed: undefined }
      },
    },
    {
      name: 'older than a user file replaced by a rename while stopped',
      reason: 'older than the files',
      change: (dataDir, seen) => {
        const user = seen.users[0] as User
        const temp = path.join(dataDir, 'users', '.edited.tmp')
        writeFileSync(temp, JSON.stringify({ ...user, name: 'Edited By Hand' }))
        renameSync(temp, userFile(dataDir, user.id))
        return dataDir
      },
      expect: (seen) => {
        const [first, ...rest] = seen.users
        return { ...seen, users: [{ ...(first as User), name: 'Edited By Hand' }, ...rest] }
      },
    },
    {
      name: 'in a restored copy of the data directory (cp -a)',
      reason: 'older than the files',
      change: (dataDir) => {
        const copy = `${dataDir}-copy`
        execFileSync('cp', ['-a', dataDir, copy])
        return copy
      },
    },
    {
      name: 'of another checkpoint than checkpoint.json',
      reason: 'checkpoint moved',
      change: (dataDir) => {
        writeFileSync(path.join(dataDir, 'checkpoint.json'), '{"through":"0000000000000001"}\n')
        return dataDir
      },
    },
    {
      name: 'matching checkpoint.json and the directories, with a tail in the log replayed past it',
      reason: 'tail replayed',
      change: (dataDir) => {
        // The checkpoint set back, and the snapshot with it: the log's tail replays at start.
        const through = '0000000000000002'
        writeFileSync(path.join(dataDir, 'checkpoint.json'), `{"through":"${through}"}\n`)
        const lines = snapshotLines(dataDir).slice(0, -1)
        lines[0] = (lines[0] ?? '').replace(/"through":"[0-9a-f]{16}"/, `"through":"${through}"`)
        writeSigned(dataDir, lines)
        return dataDir
      },
    },
  ]
  for (const miss of misses) {
    it(`is not used when ${miss.name}: the start reads every user file and serves what they hold`, async (t) => {
      const { dataDir, seen } = await stoppedWithSnapshot(t)
      const startOn = miss.change(dataDir, seen)
      const svc = await startService(t, { dataDir: startOn })
      assert.equal(missReason(svc), miss.reason)
      assert.equal(loadedFrom(svc), 'files')
      assert.equal(existsSync(path.join(startOn, SNAPSHOT)), false)
      await assertSame(svc, miss.expect?.(seen, startOn) ?? seen)
    })
  }
})
