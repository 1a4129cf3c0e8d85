import assert from 'node:assert/strict'
import { request as httpRequest } from 'node:http'
import { describe, it } from 'node:test'

import { PostgresStore } from '../../src/store/postgres/postgres-store.js'
import { freshSchema, requireDatabaseUrl, SKIP_POSTGRES } from '../helpers/postgres.js'
import { startService, type TestService, uniqueEmail } from '../helpers/service.js'

function call(
  app: TestService,
  method: string,
  path: string,
  body?: string,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      new URL(`${app.baseUrl}${path}`),
      {
        method,
        headers: { authorization: `Bearer ${app.token}`, 'content-type': 'application/x-ndjson' },
      },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (chunk: Buffer) => chunks.push(chunk))
        res.on('end', () => {
          resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') })
        })
      },
    )
    req.on('error', reject)
    req.end(body)
  })
}

/** A source service with users in every state, changed a few times, with ordered metadata. */
async function fillSource(app: TestService): Promise<void> {
  for (let i = 0; i < 60; i += 1) {
    const user = await app.createUser({
      email: uniqueEmail('Mixed.Case'),
      metadata: { zeta: String(i), alpha: 'a', [`mid.${i % 3}`]: 'm' },
    })
    if (i % 3 === 1)
      assert.equal((await app.call('POST', `/users/${user.id}:activate`)).status, 200)
    if (i % 3 === 2) {
      assert.equal((await app.call('POST', `/users/${user.id}:activate`)).status, 200)
      assert.equal((await app.call('POST', `/users/${user.id}:suspend`)).status, 200)
    }
    if (i % 5 === 0)
      assert.equal(
        (
          await app.call('PATCH', `/users/${user.id}`, {
            json: { name: `Renamed ${i}` },
            contentType: 'application/merge-patch+json',
          })
        ).status,
        200,
      )
    if (i % 11 === 0) assert.equal((await app.call('DELETE', `/users/${user.id}`)).status, 204)
  }
}

async function migrate(source: TestService, target: TestService): Promise<void> {
  const exported = await call(source, 'GET', '/users:export')
  assert.equal(exported.status, 200)
  const count = exported.text.split('\n').filter((line) => line !== '').length
  assert.ok(count > 50)
  const imported = await call(target, 'POST', '/users:import', exported.text)
  assert.equal(imported.status, 200)
  const results = imported.text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as { status: number })
  assert.equal(results.length, count)
  assert.ok(
    results.every((result) => result.status === 201),
    imported.text.slice(0, 500),
  )
  // The export on the other side is the same, byte for byte: ids, versions, statuses, time stamps, metadata order.
  assert.equal((await call(target, 'GET', '/users:export')).text, exported.text)
  // A second run changes nothing and says so.
  const rerun = await call(target, 'POST', '/users:import', exported.text)
  assert.ok(
    rerun.text
      .split('\n')
      .filter((line) => line !== '')
      .every((line) => (JSON.parse(line) as { status: number }).status === 200),
  )
  assert.equal((await call(target, 'GET', '/users:export')).text, exported.text)
}

describe('migration by export and import', () => {
  it('moves every user from one file store to another unchanged', async (t) => {
    const source = await startService(t)
    await fillSource(source)
    await migrate(source, await startService(t))
  })

  it('moves every user from the file store to PostgreSQL unchanged', {
    skip: SKIP_POSTGRES,
  }, async (t) => {
    const source = await startService(t)
    await fillSource(source)
    const target = await startService(t, {
      store: new PostgresStore({ url: requireDatabaseUrl(), schema: freshSchema(t) }),
    })
    await migrate(source, target)
  })
})
