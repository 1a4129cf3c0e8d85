import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { readdir } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { describe, it } from 'node:test'

import type { User } from '../src/domain/user.js'
import { startTestService } from '../src/testing.js'
import { assertProblem, request, type UserPage } from './helpers/http.js'
import { makeTempDir } from './helpers/service.js'
import { makeToken } from './helpers/tokens.js'

describe('startTestService (user-service/testing)', () => {
  it('serves on 127.0.0.1 with an in-memory store, and token() signs with its own secret', async (t) => {
    const service = await startTestService()
    t.after(service.close)
    assert.match(service.url, /^http:\/\/127\.0\.0\.1:\d+$/)
    assert.equal((await request('GET', `${service.url}/readyz`)).status, 200)
    const list = await request('GET', `${service.url}/users`, { token: service.token() })
    assert.equal(list.status, 200, list.text)
    assert.deepEqual(list.json<UserPage>().items, [])
    // A token made with any other secret is refused: the secret is the service's own, and random.
    assertProblem(
      await request('GET', `${service.url}/users`, { token: makeToken() }),
      401,
      'token_invalid',
    )
  })

  it('gives tokens with the scopes and subject asked for (every scope by default)', async (t) => {
    const service = await startTestService()
    t.after(service.close)
    const claims = (token: string): Record<string, unknown> =>
      JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8')) as Record<
        string,
        unknown
      >
    assert.equal(
      claims(service.token())['scope'],
      'users:read users:write users:admin events:read webhooks:admin',
    )
    assert.equal(claims(service.token())['sub'], 'test-user')
    assert.equal(claims(service.token('users:read', 'alice'))['sub'], 'alice')
    const readOnly = service.token(['users:read'])
    assert.equal((await request('GET', `${service.url}/users`, { token: readOnly })).status, 200)
    const refused = await request('POST', `${service.url}/users`, {
      token: readOnly,
      json: { email: 'a@example.com', name: 'A' },
    })
    assertProblem(refused, 403, 'insufficient_scope')
    const all = await request('GET', `${service.url}/users`, { token: service.token() })
    assert.deepEqual(all.json<UserPage>().items, [], 'the refused create stored nothing')
  })

  it('seeds users from partial fields, in any status, and returns them as stored', async (t) => {
    const service = await startTestService()
    t.after(service.close)
    const seeded = await service.seed([
      { name: 'Ada', email: 'ada@example.com', metadata: { team: 'core' } },
      {},
      { status: 'active' },
      { status: 'suspended', name: 'Sus' },
    ])
    assert.equal(seeded.length, 4)
    assert.deepEqual(
      seeded.map((user) => user.status),
      ['pending', 'pending', 'active', 'suspended'],
    )
    assert.equal(seeded[0]?.email, 'ada@example.com')
    assert.deepEqual(seeded[0]?.metadata, { team: 'core' })
    assert.equal(new Set(seeded.map((user) => user.email)).size, 4)
    const res = await request('GET', `${service.url}/users?limit=10`, {
      token: service.token('users:read'),
    })
    const stored = res.json<UserPage>().items
    assert.deepEqual(
      [...stored].sort((a, b) => (a.id < b.id ? -1 : 1)),
      [...seeded].sort((a, b) => (a.id < b.id ? -1 : 1)),
    )
  })

  it('reports a seed the service refuses, naming the status and the reason', async (t) => {
    const service = await startTestService()
    t.after(service.close)
    await service.seed([{ email: 'dup@example.com' }])
    await assert.rejects(
      service.seed([{ email: 'DUP@example.com' }]),
      /seed: POST \/users answered 409: .*duplicate_email/,
    )
    await assert.rejects(service.seed([{ email: 'not an email' }]), /answered 422/)
  })

  it('keeps users in a temporary data directory when asked, and removes it on close', async (t) => {
    const service = await startTestService({ dataDir: true })
    t.after(service.close)
    const [user] = await service.seed([{ name: 'On disk' }])
    assert.ok(user)
    const dirs = (await readdir(tmpdir())).filter((name) =>
      name.startsWith('user-service-testing-'),
    )
    const dir = dirs
      .map((name) => path.join(tmpdir(), name))
      .find((candidate) => existsSync(path.join(candidate, 'users', `${user.id}.json`)))
    assert.ok(dir, 'the user file is in a user-service-testing- directory')
    await service.close()
    await service.close()
    assert.equal(existsSync(dir), false)
    await assert.rejects(
      fetch(`${service.url}/healthz`),
      (error: unknown) =>
        error instanceof TypeError &&
        error.message === 'fetch failed' &&
        (error.cause as { code?: unknown } | undefined)?.code === 'ECONNREFUSED',
    )
  })

  it('uses a given data directory and keeps it, so a second service sees the same users', async (t) => {
    const dataDir = path.join(await makeTempDir(t), 'data')
    const first = await startTestService({ dataDir })
    const [user] = await first.seed([{ status: 'active' }])
    await first.close()
    assert.ok(user)
    assert.ok(existsSync(path.join(dataDir, 'users', `${user.id}.json`)))
    const second = await startTestService({ dataDir })
    t.after(second.close)
    const res = await request('GET', `${second.url}/users/${user.id}`, { token: second.token() })
    assert.equal(res.status, 200)
    assert.deepEqual(res.json<User>(), user)
  })

  it('passes corsOrigins on to the service', async (t) => {
    const service = await startTestService({ corsOrigins: ['http://localhost:3000'] })
    t.after(service.close)
    const res = await request('GET', `${service.url}/healthz`, {
      headers: { origin: 'http://localhost:3000' },
    })
    assert.equal(res.headers.get('access-control-allow-origin'), 'http://localhost:3000')
  })
})
