import assert from 'node:assert/strict'
import path from 'node:path'
import { describe, it } from 'node:test'

import pg from 'pg'

import { splitUrlOptions } from '../../src/store/postgres/pools.js'
import { startChild } from '../helpers/child.js'
import { assertProblem, request } from '../helpers/http.js'
import { freshDatabase, SKIP_POSTGRES, sql } from '../helpers/postgres.js'
import { makeTempDir, uniqueEmail } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

const admin = makeToken()

/**
 * A DATABASE_URL may carry libpq's `options` parameter (a search_path, most often). The driver
 * lets the URL's parameters override its other settings, so the service's own session time-outs,
 * sent as startup options too, were dropped without a word: a session stuck waiting (or a frozen
 * replica idle in a transaction holding the event counter) was never ended by the server.
 */
describe('a DATABASE_URL with an options parameter', { skip: SKIP_POSTGRES }, () => {
  it("keeps the URL's options and the service's time-outs on every session", {
    timeout: 90_000,
  }, async (t) => {
    const base = await freshDatabase(t)
    await sql('CREATE SCHEMA tenant_a', [], base)
    const url = new URL(base)
    url.searchParams.set('options', '-c search_path=tenant_a')
    // pg's own parameters for the two time-outs, which it sends after the options: the service's
    // still hold.
    url.searchParams.set('statement_timeout', '0')
    url.searchParams.set('idle_in_transaction_session_timeout', '0')
    const root = await makeTempDir(t, 'url-options-')
    const replica = await startChild(
      {
        dataDir: path.join(root, 'data'),
        env: { DATABASE_URL: url.toString(), DATABASE_STATEMENT_TIMEOUT_MS: '1000' },
      },
      30_000,
    )
    t.after(() => replica.stop('SIGKILL'))

    // The URL's search_path holds: the service made its tables in tenant_a.
    const tables = await sql(
      "SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'tenant_a' AND tablename = 'users'",
      [],
      base,
    )
    assert.equal(tables.rows[0].n, 1)

    // A commit kept from the event counter: the server's own statement_timeout (1 s) ends the
    // service's statement, rather than leaving it waiting after the request was answered.
    const holder = new pg.Client({ connectionString: base })
    await holder.connect()
    try {
      await holdCounter(holder, replica.url)
    } finally {
      await holder.end()
    }
  })
})

describe('splitUrlOptions', () => {
  it('takes the options out of every form of URL the driver reads, leaving the rest as it was', () => {
    assert.deepEqual(splitUrlOptions('postgres://u@h/db'), {
      rest: 'postgres://u@h/db',
      options: undefined,
    })
    assert.deepEqual(splitUrlOptions('postgres://u:p%23@h:5432/db?options=-c%20search_path%3Dx'), {
      rest: 'postgres://u:p%23@h:5432/db',
      options: '-c search_path=x',
    })
    // No host (new URL() refuses it), a socket directory, and a `+` read as a space, as pg does.
    assert.deepEqual(
      splitUrlOptions('postgres://u@/db?host=/run/pg&options=-c+a%3Db&sslmode=disable'),
      {
        rest: 'postgres://u@/db?host=%2Frun%2Fpg&sslmode=disable',
        options: '-c a=b',
      },
    )
  })

  it("drops pg's parameters for the session time-outs, which would override the service's", () => {
    const url = 'postgres://u@h/db?statement_timeout=0&sslmode=disable'
    assert.deepEqual(splitUrlOptions(`${url}&idle_in_transaction_session_timeout=0`), {
      rest: 'postgres://u@h/db?sslmode=disable',
      options: undefined,
    })
  })

  it("drops pg's query_timeout, which would replace the service's own give-up", () => {
    // With ?query_timeout=60000, a request to a frozen server waited a minute, not the statement
    // time-out and a second.
    assert.deepEqual(splitUrlOptions('postgres://u@h/db?query_timeout=60000&sslmode=disable'), {
      rest: 'postgres://u@h/db?sslmode=disable',
      options: undefined,
    })
  })
})

/** Holds the event counter while a create is sent, then checks the server ended its wait. */
async function holdCounter(holder: pg.Client, replicaUrl: string): Promise<void> {
  await holder.query('BEGIN')
  await holder.query('SELECT * FROM tenant_a.event_counter FOR UPDATE')
  const res = await request('POST', `${replicaUrl}/users`, {
    token: admin,
    json: { email: uniqueEmail(), name: 'Kept Waiting' },
  })
  assertProblem(res, 503, 'storage_unavailable')
  const waiting = await holder.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE application_name = 'user-service' AND datname = current_database()
          AND wait_event_type = 'Lock'`,
  )
  assert.equal(waiting.rows[0]?.n, 0, 'a statement of the service still waits on the server')
  await holder.query('ROLLBACK')
}
