import assert from 'node:assert/strict'
import type { Socket } from 'node:net'
import { describe, it, type TestContext } from 'node:test'

import pg from 'pg'

import type { UserServiceOptions } from '../../src/process/create-user-service.js'
import { PostgresStore } from '../../src/store/postgres/postgres-store.js'
import type { TestResponse } from '../helpers/http.js'
import { freshSchema, requireDatabaseUrl, SKIP_POSTGRES, sql } from '../helpers/postgres.js'
import { openSocket, parseRawResponse, type RawResponse } from '../helpers/raw-exchange.js'
import { startService, type TestService, uniqueEmail } from '../helpers/service.js'

const KEY = '"5d0c2f8e-93a1-4b7e-8f42-1c6e0a9b7d35"'

/** The service on a fresh schema of its own, and that schema's name. */
async function startOnPostgres(
  t: TestContext,
  options: Partial<UserServiceOptions> = {},
): Promise<{ s: TestService; schema: string }> {
  const schema = freshSchema(t)
  const store = new PostgresStore({ url: requireDatabaseUrl(), schema, eventPollMs: 50 })
  t.after(() => store.close())
  return { s: await startService(t, { store, ...options }), schema }
}

/** Holds in the table now: rows of requests in flight, without an answer. */
async function holdsIn(schema: string): Promise<number> {
  const found = await sql(
    `SELECT count(*)::int AS n FROM ${schema}.idempotency_keys WHERE status IS NULL`,
  )
  return Number(found.rows[0]?.n)
}

/** A session of the test's own that runs `statements` in a transaction until `end` is called. */
async function lockWith(t: TestContext, statements: string): Promise<{ end: () => Promise<void> }> {
  const locker = new pg.Client({ connectionString: requireDatabaseUrl() })
  locker.on('error', () => undefined)
  await locker.connect()
  t.after(() => locker.end())
  await locker.query('BEGIN')
  await locker.query(statements)
  return {
    end: async () => {
      await locker.query('ROLLBACK')
    },
  }
}

/**
 * A keyed `POST /users` whose head and first byte are sent now; `rest` sends the rest of the body,
 * `close` drops the connection, and `answer` resolves with the first whole response.
 */
async function heldCreate(
  t: TestContext,
  s: TestService,
  body: string,
): Promise<{ rest: () => void; close: () => void; answer: Promise<RawResponse> }> {
  const socket: Socket = await openSocket(s.url)
  t.after(() => socket.destroy())
  const bytes = Buffer.from(body)
  socket.write(
    [
      'POST /users HTTP/1.1',
      `host: ${new URL(s.url).host}`,
      `authorization: Bearer ${s.token}`,
      'content-type: application/json',
      `content-length: ${bytes.length}`,
      `idempotency-key: ${KEY}`,
      '',
      '',
    ].join('\r\n'),
  )
  socket.write(bytes.subarray(0, 1))
  socket.on('error', () => undefined)
  const answer = new Promise<RawResponse>((resolve) => {
    let received = ''
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1')
      const response = parseRawResponse(received)
      if (response !== undefined) resolve(response)
    })
  })
  return { rest: () => socket.write(bytes.subarray(1)), close: () => socket.destroy(), answer }
}

function keyedCreate(s: TestService, email: string) {
  return s.call('POST', '/users', {
    json: { email, name: 'Corrected' },
    headers: { 'idempotency-key': KEY },
  })
}

/** Retries the keyed create until its key is no longer held (409), and returns that answer. */
async function retryUntilFree(s: TestService, email: string): Promise<TestResponse> {
  let retry: TestResponse | undefined
  await waitUntil('its key to be free again', async () => {
    retry = await keyedCreate(s, email)
    return retry.status !== 409
  })
  if (retry === undefined) throw new Error('no retry was made')
  return retry
}

async function waitUntil(what: string, check: () => Promise<boolean>, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

describe('Idempotency-Key holds on PostgreSQL, given back', { skip: SKIP_POSTGRES }, () => {
  it('a refused request gives its hold back before its refusal is sent: the corrected request runs at once', async (t) => {
    const { s, schema } = await startOnPostgres(t)
    const refused = await heldCreate(t, s, JSON.stringify({ email: 'not an email', name: 'Bad' }))
    await waitUntil('the request to hold its key', async () => (await holdsIn(schema)) === 1)
    // The hold's row locked by another session: giving it back waits until that session ends.
    const locker = await lockWith(
      t,
      `SELECT 1 FROM ${schema}.idempotency_keys WHERE status IS NULL FOR UPDATE`,
    )
    refused.rest()
    const early = await Promise.race([
      refused.answer,
      new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 1000)),
    ])
    const holdsWhenAnswered = early === undefined ? undefined : await holdsIn(schema)
    await locker.end()
    const answer = await refused.answer
    assert.equal(answer.status, 422, answer.text)
    assert.equal(holdsWhenAnswered ?? 0, 0, 'the 422 was sent while its hold was still taken')
    const corrected = await keyedCreate(s, uniqueEmail())
    assert.equal(corrected.status, 201, corrected.text)
    assert.equal(corrected.headers.get('idempotent-replayed'), null)
  })

  it('a request whose client left while its hold waited for the database gives its key back', async (t) => {
    const { s, schema } = await startOnPostgres(t)
    // Every hold waits until the table is let go; meanwhile the whole request arrives, and its
    // client goes away before any answer.
    const locker = await lockWith(t, `LOCK TABLE ${schema}.idempotency_keys IN EXCLUSIVE MODE`)
    const email = uniqueEmail()
    const body = JSON.stringify({ email, name: 'Gone' })
    const gone = await heldCreate(t, s, body)
    gone.rest()
    await waitUntil('the hold to wait for the lock', async () => {
      const waiting = await sql('SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted')
      return Number(waiting.rows[0]?.n) > 0
    })
    gone.close()
    await new Promise((resolve) => setTimeout(resolve, 200))
    await locker.end()
    // The hold is taken now, for a request whose client is gone: it must not outlive it.
    const retry = await retryUntilFree(s, email)
    assert.equal(retry.status, 201, retry.text)
    assert.equal(retry.headers.get('idempotent-replayed'), null)
    assert.equal(await holdsIn(schema), 0)
  })

  it('a hold taken after its request was answered 408 (the database slow) is given back', async (t) => {
    const { s, schema } = await startOnPostgres(t, {
      headersTimeoutMs: 500,
      requestTimeoutMs: 1000,
    })
    // Every hold waits until the table is let go: the request's times out first.
    const locker = await lockWith(t, `LOCK TABLE ${schema}.idempotency_keys IN EXCLUSIVE MODE`)
    const email = uniqueEmail()
    const late = await heldCreate(t, s, JSON.stringify({ email, name: 'Late' }))
    const timedOut = await late.answer
    assert.equal(timedOut.status, 408, timedOut.text)
    await locker.end()
    // The hold is taken now, for a request that ended: it must not outlive it (nor be renewed).
    const retry = await retryUntilFree(s, email)
    assert.equal(retry.status, 201, retry.text)
    assert.equal(await holdsIn(schema), 0)
    assert.equal((await s.snapshot()).length, 1)
  })
})
