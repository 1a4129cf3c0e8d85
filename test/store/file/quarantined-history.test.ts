import assert from 'node:assert/strict'
import { readdir, readFile, rename, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { describe, it } from 'node:test'

import { makeTempDir, startService, type TestService } from '../../helpers/service.js'
import { makeToken } from '../../helpers/tokens.js'

async function eventTypes(s: TestService, userId: string): Promise<string[]> {
  const res = await s.call('GET', `/events?userId=${userId}`, {
    token: makeToken({ scope: 'events:read' }),
  })
  assert.equal(res.status, 200, res.text)
  return res.json<{ items: { type: string }[] }>().items.map((event) => event.type)
}

describe('a user file moved to quarantine at start', () => {
  it("holds its user's events back without voiding them: put back, the user and its history return", async (t) => {
    const dataDir = path.join(await makeTempDir(t), 'data')
    const first = await startService(t, { dataDir })
    const user = await first.createUser()
    const patched = await first.call('PATCH', `/users/${user.id}`, { json: { name: 'Later' } })
    assert.equal(patched.status, 200, patched.text)
    await first.service.close()

    // Damaged while stopped (a disk fault, a hand edit), as a whole file replaced by a torn one.
    const file = path.join(dataDir, 'users', `${user.id}.json`)
    const whole = await readFile(file, 'utf8')
    await writeFile(`${file}.part`, whole.slice(0, 50))
    await rename(`${file}.part`, file)
    const second = await startService(t, { dataDir })
    assert.equal((await second.call('GET', `/users/${user.id}`)).status, 404)
    assert.deepEqual(await eventTypes(second, user.id), [])
    const held = second.logs.find((line) => String(line['msg']).startsWith('events held back'))
    assert.equal(held?.['level'], 'warn')
    assert.equal(held?.['events'], 2)
    assert.equal(
      second.logs.find((line) => line['msg'] === 'events loaded')?.['voided'],
      0,
      'nothing voided',
    )
    await second.service.close()

    // A start with the file still in quarantine holds them back again.
    const third = await startService(t, { dataDir })
    assert.deepEqual(await eventTypes(third, user.id), [])
    await third.service.close()

    // The operator puts the good file back.
    const quarantined = (await readdir(path.join(dataDir, 'quarantine'))).filter((name) =>
      name.startsWith(user.id),
    )
    assert.equal(quarantined.length, 1)
    await writeFile(file, whole)
    const fourth = await startService(t, { dataDir })
    const back = await fourth.call('GET', `/users/${user.id}`)
    assert.equal(back.status, 200, back.text)
    assert.equal(back.json<{ version: number }>().version, 2)
    assert.deepEqual(await eventTypes(fourth, user.id), ['user.created', 'user.updated'])
  })
})
