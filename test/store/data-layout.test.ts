import assert from 'node:assert/strict'
import { cp, readFile, rm, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import type { User } from '../../src/domain/user.js'
import { PROJECT_ROOT, startChild } from '../helpers/child.js'
import { request } from '../helpers/http.js'
import { LAYOUT_1, observeData } from '../helpers/layout-fixture.js'
import { makeTempDir } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

/*
 * test/fixtures/layout-1 is a data directory a release of layout 1 wrote (users in every state,
 * metadata in its order, a deletion, a revocation, a keyed create, a webhook endpoint with its
 * cursor and delivery log); layout-1.expected.json is what the API showed of it then. Every later
 * release must show the same, after a clean stop and with the log's tail to replay: a change of
 * the files' layout that breaks this breaks every data directory in the field.
 */

const FIXTURE = path.join(PROJECT_ROOT, 'test', 'fixtures', 'layout-1')
/** The fixture's events are from 2026: a default retention would prune them as the years pass. */
const ENV = { EVENTS_RETENTION_DAYS: '36500' }

async function copyOfFixture(t: TestContext): Promise<string> {
  const dataDir = path.join(await makeTempDir(t, 'layout-'), 'data')
  await cp(FIXTURE, dataDir, { recursive: true })
  return dataDir
}

async function expected(): Promise<unknown> {
  return JSON.parse(
    await readFile(path.join(PROJECT_ROOT, 'test/fixtures/layout-1.expected.json'), 'utf8'),
  )
}

describe('a data directory of layout 1, read by this release', () => {
  it('serves every user, event and webhook as it was written, keeps the revocation, and writes on', async (t) => {
    const dataDir = await copyOfFixture(t)
    const child = await startChild({ dataDir, env: ENV })
    t.after(() => child.stop('SIGKILL'))
    assert.deepEqual(await observeData(child.url), await expected())

    const revoked = await request('GET', `${child.url}/users/${LAYOUT_1.revokedUser}`, {
      token: makeToken({
        sub: LAYOUT_1.revokedUser,
        nowS: Date.parse('2026-11-30T17:33:00Z') / 1000,
        ttl: 1e9,
      }),
    })
    assert.equal(revoked.status, 401, revoked.text)
    assert.equal(revoked.json<{ code: string }>().code, 'token_revoked')
    const gone = await request('GET', `${child.url}/users/${LAYOUT_1.deletedUser}`, {
      token: makeToken(),
    })
    assert.equal(gone.status, 404)

    const created = await request('POST', `${child.url}/users`, {
      token: makeToken(),
      json: { email: 'after-upgrade@example.com', name: 'After' },
    })
    assert.equal(created.status, 201, created.text)
    const events = await request('GET', `${child.url}/events?after=0000000000000000&limit=100`, {
      token: makeToken({ scope: 'events:read' }),
    })
    const ids = events.json<{ items: { id: string; userId: string }[] }>().items
    assert.equal(ids.at(-1)?.userId, created.json<User>().id, 'the new event comes after the old')
    assert.deepEqual(
      [...ids.map((item) => item.id)].sort(),
      ids.map((item) => item.id),
    )
  })

  it('replays the whole log into the files when the checkpoint is behind, to the same result', async (t) => {
    const dataDir = await copyOfFixture(t)
    const first = JSON.parse(
      (await readFile(path.join(dataDir, 'events', '0000000000000001.ndjson'), 'utf8')).split(
        '\n',
      )[0] ?? '',
    ) as { id: string }
    await writeFile(
      path.join(dataDir, 'checkpoint.json'),
      `${JSON.stringify({ through: first.id })}\n`,
    )
    await rm(path.join(dataDir, 'users'), { recursive: true })
    await rm(path.join(dataDir, 'tombstones'), { recursive: true })
    const child = await startChild({ dataDir, env: ENV })
    t.after(() => child.stop('SIGKILL'))
    assert.deepEqual(await observeData(child.url), await expected())
  })
})
