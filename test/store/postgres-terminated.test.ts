import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import pg from 'pg'

import type { User } from '../../src/domain/user.js'
import { sleep, startChild, waitForOutput } from '../helpers/child.js'
import { assertProblem, request } from '../helpers/http.js'
import { waitFor } from '../helpers/ops.js'
import { freshDatabase, SKIP_POSTGRES } from '../helpers/postgres.js'
import { makeTempDir, uniqueEmail } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

const admin = makeToken()

describe('a PostgreSQL connection ended under a running statement', { skip: SKIP_POSTGRES }, () => {
  it('answers 503 storage_unavailable for that write, keeps the process up, and writes again once the database does', {
    timeout: 60_000,
  }, async (t) => {
    const url = await freshDatabase(t)
    const service = await startChild(
      { dataDir: await makeTempDir(t, 'pg-terminated-'), env: { DATABASE_URL: url } },
      30_000,
    )
    t.after(() => service.stop('SIGKILL'))
    const created = await request('POST', `${service.url}/users`, {
      token: admin,
      json: { email: uniqueEmail(), name: 'Locked Row' },
    })
    assert.equal(created.status, 201, created.text)
    const user = created.json<User>()

    // Another session holds the row, so the service's UPDATE waits on it inside its transaction.
    const locker = new pg.Client({ connectionString: url })
    locker.on('error', () => undefined)
    await locker.connect()
    t.after(() => locker.end())
    await locker.query('BEGIN')
    await locker.query('SELECT 1 FROM users WHERE id = $1 FOR UPDATE', [user.id])
    const patch = request('PATCH', `${service.url}/users/${user.id}`, {
      token: admin,
      json: { name: 'Never Written' },
      contentType: 'application/merge-patch+json',
    })
    // Only a session that waits for this locker: the server is shared with the other test files,
    // whose sessions wait for locks of their own (ending one of those failed another file's test).
    const waiting = await waitFor(
      'the service to wait on the locked row',
      async () =>
        (
          await locker.query<{ pid: number }>(
            `SELECT pid FROM pg_stat_activity WHERE application_name = 'user-service'
              AND pg_backend_pid() = ANY (pg_blocking_pids(pid))`,
          )
        ).rows[0]?.pid,
      5000,
    )
    await locker.query('SELECT pg_terminate_backend($1)', [waiting])

    // Ended before its COMMIT: nothing was made, and the 503 says so (no outcome to doubt).
    const refused = assertProblem(await patch, 503, 'storage_unavailable')
    assert.equal(refused.outcome, undefined)
    // Ended by the termination (57P01), not by the statement time-out (57014) after 30 s: a
    // termination that hit another session would leave this one waiting until then.
    await waitForOutput(service, '"operation":"updateUser","sqlstate":"57P01"')
    await locker.query('ROLLBACK')
    await sleep(200)
    assert.equal(service.proc.exitCode, null, `the service exited:\n${service.stderr()}`)
    assert.equal(service.proc.signalCode, null)
    const health = await request('GET', `${service.url}/healthz`)
    assert.equal(health.status, 200)
    const again = await request('PATCH', `${service.url}/users/${user.id}`, {
      token: admin,
      json: { name: 'Written Later' },
      contentType: 'application/merge-patch+json',
    })
    assert.equal(again.status, 200, again.text)
    assert.equal(again.json<User>().name, 'Written Later')
    assert.equal(again.json<User>().version, 2)
  })
})
