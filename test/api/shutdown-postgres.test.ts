import assert from 'node:assert/strict'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import pg from 'pg'

import { type RunningChild, startChild } from '../helpers/child.js'
import { request } from '../helpers/http.js'
import { holdRequest, waitFor } from '../helpers/ops.js'
import { freshDatabase, SKIP_POSTGRES } from '../helpers/postgres.js'
import { makeTempDir, uniqueEmail } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'
import { startReceiver } from '../helpers/webhook-receivers.js'

/**
 * A session of another program that holds an ACCESS EXCLUSIVE lock on `table` until the test
 * ends: every statement of the service on that table waits for it.
 */
async function lockTable(t: TestContext, url: string, table: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url })
  // The test's database is dropped WITH (FORCE) as it ends, which ends this session too.
  client.on('error', () => undefined)
  await client.connect()
  t.after(() => client.end())
  await client.query('BEGIN')
  await client.query(`LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`)
  return client
}

/** Waits until a session of the service waits for a lock (its statement is blocked). */
async function waitForBlockedStatement(locker: pg.Client): Promise<void> {
  await waitFor('a statement of the service to wait for the lock', async () => {
    const found = await locker.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'user-service' AND wait_event_type = 'Lock'",
    )
    return (found.rows[0] as { n: number }).n > 0 ? true : undefined
  })
}

async function exitWithin(child: RunningChild, ms: number) {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => {
      reject(new Error(`the process did not exit within ${ms} ms of SIGTERM:\n${child.stdout()}`))
    }, ms)
  })
  try {
    return await Promise.race([child.exited, late])
  } finally {
    clearTimeout(timer)
  }
}

/**
 * A service on a database of its own, with no statement time-out at all (DATABASE_STATEMENT_TIMEOUT_MS=0):
 * only the stop itself may end a statement that waits for another session's lock.
 */
async function startOnFreshDatabase(t: TestContext, env: Record<string, string> = {}) {
  const url = await freshDatabase(t)
  const dataDir = path.join(await makeTempDir(t, 'pg-stop-'), 'data')
  const child = await startChild({
    dataDir,
    env: {
      DATABASE_URL: url,
      DATABASE_STATEMENT_TIMEOUT_MS: '0',
      SHUTDOWN_TIMEOUT_MS: '1000',
      ...env,
    },
  })
  t.after(() => child.stop('SIGKILL'))
  return { url, child }
}

describe('SIGTERM with PostgreSQL while another session holds a lock the service waits for', {
  skip: SKIP_POSTGRES,
}, () => {
  it('cuts the request whose statement waits, and exits 0 soon after SHUTDOWN_TIMEOUT_MS', {
    timeout: 60_000,
  }, async (t) => {
    const { url, child } = await startOnFreshDatabase(t)
    const locker = await lockTable(t, url, 'users')
    const held = holdRequest(child.url, {
      path: '/users',
      token: makeToken(),
      body: JSON.stringify({ email: uniqueEmail('blocked'), name: 'Blocked' }),
    })
    t.after(() => {
      held.abort()
    })
    held.finish()
    await waitForBlockedStatement(locker)
    child.proc.kill('SIGTERM')
    // Before, the exit waited for the statement: for as long as the lock was held (for ever).
    const { code } = await exitWithin(child, 8000)
    assert.equal(code, 0, child.stderr())
    await assert.rejects(held.response)
    assert.match(child.stdout(), /"msg":"stopped"/)
  })

  it('exits 0 soon when a webhook delivery, not a request, is the one waiting', {
    timeout: 60_000,
  }, async (t) => {
    const receiver = await startReceiver()
    t.after(() => receiver.close())
    const { url, child } = await startOnFreshDatabase(t, {
      WEBHOOK_ALLOW_NETWORKS: '127.0.0.0/8',
    })
    const token = makeToken({ scope: 'users:write webhooks:admin' })
    const created = await request('POST', `${child.url}/webhooks`, {
      token,
      json: { url: `${receiver.url}/hook` },
    })
    assert.equal(created.status, 201, created.text)
    // The delivery's next step reads the endpoint's cursor: that read waits for the lock.
    const locker = await lockTable(t, url, 'webhook_cursors')
    const user = await request('POST', `${child.url}/users`, {
      token,
      json: { email: uniqueEmail('hooked'), name: 'Hooked' },
    })
    assert.equal(user.status, 201, user.text)
    await waitForBlockedStatement(locker)
    child.proc.kill('SIGTERM')
    // No request is in flight: the exit need not wait even for SHUTDOWN_TIMEOUT_MS.
    const { code } = await exitWithin(child, 8000)
    assert.equal(code, 0, child.stderr())
    assert.match(child.stdout(), /"msg":"stopped"/)
  })
})
