import assert from 'node:assert/strict'
import { connect, createServer, type Socket } from 'node:net'
import { describe, it, type TestContext } from 'node:test'

import pg from 'pg'

import type { User } from '../../src/domain/user.js'
import { commitMayHaveLanded } from '../../src/store/postgres/classify-error.js'
import { startChild } from '../helpers/child.js'
import { assertProblem, request } from '../helpers/http.js'
import { freshDatabase, SKIP_POSTGRES } from '../helpers/postgres.js'
import { makeTempDir, uniqueEmail } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

const admin = makeToken()

/**
 * A TCP proxy to PostgreSQL that, once armed, passes the next simple-protocol COMMIT on to the
 * server and then cuts that connection without passing the server's answer back: the commit is
 * made, and the service never hears so.
 */
async function commitCutter(t: TestContext, target: URL): Promise<{ url: URL; arm: () => void }> {
  let armed = false
  const marker = Buffer.from('COMMIT\0')
  const proxy = createServer((client: Socket) => {
    const server = connect(Number(target.port), target.hostname)
    let cut = false
    client.on('error', () => undefined)
    server.on('error', () => undefined)
    client.on('data', (chunk: Buffer) => {
      // A Query message: the byte Q, its length (4 bytes), then the text and a NUL.
      const at = chunk.indexOf(marker)
      if (armed && at >= 5 && chunk[at - 5] === 0x51) {
        armed = false
        cut = true
        setTimeout(() => {
          client.destroy()
          server.destroy()
        }, 200)
      }
      server.write(chunk)
    })
    server.on('data', (chunk: Buffer) => {
      if (!cut) client.write(chunk)
    })
    client.on('close', () => server.destroy())
    server.on('close', () => client.destroy())
  })
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve))
  t.after(() => new Promise<void>((resolve) => proxy.close(() => resolve())))
  const address = proxy.address()
  assert.ok(address !== null && typeof address === 'object')
  const url = new URL(target.href)
  url.hostname = '127.0.0.1'
  url.port = String(address.port)
  return {
    url,
    arm: () => {
      armed = true
    },
  }
}

describe('a PostgreSQL commit whose answer never comes', { skip: SKIP_POSTGRES }, () => {
  it('is 503 storage_unavailable with outcome unknown; the change was made, and a keyed retry replays it', {
    timeout: 60_000,
  }, async (t) => {
    const url = await freshDatabase(t)
    const cutter = await commitCutter(t, new URL(url))
    const service = await startChild(
      {
        dataDir: await makeTempDir(t, 'pg-commit-cut-'),
        env: { DATABASE_URL: cutter.url.toString() },
      },
      30_000,
    )
    t.after(() => service.stop('SIGKILL'))
    const email = uniqueEmail()
    const send = () =>
      request('POST', `${service.url}/users`, {
        token: admin,
        json: { email, name: 'Cut Commit' },
        headers: { 'idempotency-key': '"commit-cut"' },
      })
    cutter.arm()
    const cut = assertProblem(await send(), 503, 'storage_unavailable')
    assert.equal(cut.outcome, 'unknown', JSON.stringify(cut))
    assert.match(cut.detail, /whether it was made is unknown/)

    // The commit was made: the user and its one event are in the database.
    const db = new pg.Client({ connectionString: url })
    db.on('error', () => undefined)
    await db.connect()
    const rows = await db.query<{ id: string }>('SELECT id FROM users WHERE email = $1', [email])
    const events = await db.query('SELECT 1 FROM events WHERE user_id = $1', [rows.rows[0]?.id])
    await db.end()
    assert.equal(rows.rows.length, 1)
    assert.equal(events.rows.length, 1)

    // The retry the answer asks for: the same key gets the change's own 201, made once.
    const retried = await send()
    assert.equal(retried.status, 201, retried.text)
    assert.equal(retried.headers.get('idempotent-replayed'), 'true')
    assert.equal(retried.json<User>().id, rows.rows[0]?.id)
  })
})

describe('commitMayHaveLanded', () => {
  it('is false only for what the server refuses a commit with: classes 23 and 40', () => {
    const server = (code: string) =>
      Object.assign(new Error('refused'), { code, severity: 'ERROR' })
    assert.equal(commitMayHaveLanded(server('23505')), false)
    assert.equal(commitMayHaveLanded(server('40001')), false)
    assert.equal(commitMayHaveLanded(server('40P01')), false)
    assert.equal(commitMayHaveLanded(server('57P01')), true)
    assert.equal(commitMayHaveLanded(server('08006')), true)
    assert.equal(
      commitMayHaveLanded(Object.assign(new Error('gone'), { code: 'ECONNRESET' })),
      true,
    )
    assert.equal(commitMayHaveLanded(new Error('Connection terminated unexpectedly')), true)
  })
})
