// Written as any project would: the service comes from the installed package, nothing else.
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'node:test'

import { startTestService } from 'user-service/testing'

describe('my app against a real user service', () => {
  it('lists seeded users with a read token', async (t) => {
    const service = await startTestService()
    t.after(service.close)
    const [ada] = await service.seed([{ name: 'Ada', status: 'active' }, { name: 'Grace' }])
    const res = await fetch(`${service.url}/users?status=active`, {
      headers: { authorization: `Bearer ${service.token(['users:read'])}` },
    })
    assert.equal(res.status, 200)
    const page = await res.json()
    assert.deepEqual(
      page.items.map((user) => user.id),
      [ada.id],
    )
  })

  it('refuses a write without users:write', async (t) => {
    const service = await startTestService()
    t.after(service.close)
    const res = await fetch(`${service.url}/users`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${service.token('users:read', 'reader')}`,
        'content-type': 'application/json',
      },
      body: JSON.stringify({ email: 'someone@example.com', name: 'Someone' }),
    })
    assert.equal(res.status, 403)
    assert.equal((await res.json()).code, 'insufficient_scope')
  })

  it('keeps users across a restart with a data directory', async (t) => {
    const dataDir = await mkdtemp(join(tmpdir(), 'consumer-'))
    t.after(() => rm(dataDir, { recursive: true, force: true }))
    const first = await startTestService({ dataDir })
    const [user] = await first.seed([{ email: 'kept@example.com' }])
    await first.close()
    const second = await startTestService({ dataDir })
    t.after(second.close)
    const res = await fetch(`${second.url}/users/${user.id}`, {
      headers: { authorization: `Bearer ${second.token()}` },
    })
    assert.equal((await res.json()).email, 'kept@example.com')
  })
})
