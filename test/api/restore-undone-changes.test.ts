import assert from 'node:assert/strict'
import { cp, readFile, rm } from 'node:fs/promises'
import path from 'node:path'
import { describe, it } from 'node:test'

import type { User } from '../../src/domain/user.js'
import { PROJECT_ROOT, type RunningChild, startChild } from '../helpers/child.js'
import { request } from '../helpers/http.js'
import { makeTempDir, uniqueEmail } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'
import { ADMIN } from '../helpers/webhook-api.js'
import { eventually, startReceiver } from '../helpers/webhook-receivers.js'

/**
 * What a restore of an older backup undoes besides the users: the webhook endpoints' changes and
 * the kept Idempotency-Keys made after the backup. An operator must know both: a deleted endpoint
 * comes back and sends the new events, personal data included, to a receiver that was removed,
 * and a retry with a key answered after the backup makes its change again under a new id.
 */

const token = makeToken()

/** The paragraph of a doc that says what a restore undoes. */
async function undoneParagraph(doc: string, start: string): Promise<string> {
  const text = (await readFile(path.join(PROJECT_ROOT, 'docs', doc), 'utf8')).replace(/\s+/g, ' ')
  const at = text.indexOf(start)
  assert.ok(at >= 0, `${doc} says what a restore undoes ("${start}")`)
  return text.slice(at, at + 1500)
}

describe('a restore of an older backup undoes the changes made after it', () => {
  it('a webhook endpoint deleted after the backup comes back and delivers; a key kept after it runs again', {
    timeout: 60_000,
  }, async (t) => {
    const root = await makeTempDir(t, 'restore-undone-')
    const dataDir = path.join(root, 'data')
    const backup = path.join(root, 'backup')
    const receiver = await startReceiver()
    const running = new Set<RunningChild>()
    t.after(async () => {
      await Promise.all([...running].map((child) => child.stop('SIGKILL')))
      await receiver.close()
    })
    const start = async (): Promise<RunningChild> => {
      const child = await startChild({ dataDir, env: { WEBHOOK_ALLOW_NETWORKS: '127.0.0.0/8' } })
      running.add(child)
      return child
    }
    const keyed = (url: string, email: string) =>
      request('POST', `${url}/users`, {
        token,
        json: { email, name: 'Keyed' },
        headers: { 'idempotency-key': '"after-the-backup"' },
      })

    let child = await start()
    const created = await request('POST', `${child.url}/webhooks`, {
      token: ADMIN,
      json: { url: `${receiver.url}/removed` },
    })
    assert.equal(created.status, 201, created.text)
    const endpoint = created.json<{ id: string }>()
    await child.stop()
    await cp(dataDir, backup, { recursive: true, preserveTimestamps: true })

    child = await start()
    const removed = await request('DELETE', `${child.url}/webhooks/${endpoint.id}`, {
      token: ADMIN,
    })
    assert.equal(removed.status, 204, removed.text)
    const email = uniqueEmail('restore-key')
    const first = await keyed(child.url, email)
    assert.equal(first.status, 201, first.text)
    await child.stop()
    await rm(dataDir, { recursive: true })
    await cp(backup, dataDir, { recursive: true, preserveTimestamps: true })

    child = await start()
    const listed = await request('GET', `${child.url}/webhooks`, { token: ADMIN })
    assert.deepEqual(
      listed.json<{ items: { id: string }[] }>().items.map((item) => item.id),
      [endpoint.id],
      'the endpoint deleted after the backup is back',
    )
    const retried = await keyed(child.url, email)
    assert.equal(retried.status, 201, 'the key kept after the backup is lost: the retry runs again')
    assert.notEqual(retried.json<User>().id, first.json<User>().id, 'under a new id')
    await eventually(() => receiver.received.some((got) => got.path === '/removed'), 10_000)

    for (const [doc, start] of [
      ['operations.md', 'Every change made after the backup is undone'],
      ['postgresql.md', 'The changes made after the dump are undone'],
    ] as const) {
      const paragraph = await undoneParagraph(doc, start)
      assert.match(paragraph, /`DELETE` of a webhook endpoint/, `${doc} names deleted endpoints`)
      assert.match(paragraph, /`Idempotency-Key`/, `${doc} names the kept keys`)
    }
  })
})
