import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdir, readdir, readFile } from 'node:fs/promises'
import path from 'node:path'
import { describe, it } from 'node:test'
import { promisify } from 'node:util'

import type { User } from '../../src/domain/user.js'
import { sleep } from '../helpers/child.js'
import type { TestResponse } from '../helpers/http.js'
import { makeTempDir, startService, uniqueEmail } from '../helpers/service.js'

const run = promisify(execFile)

const keyed = (key: string): Record<string, string> => ({ 'idempotency-key': `"${key}"` })

/** `cp -a` of these entries of `from` into `to`, as an operator copies a data directory. */
async function copyEntries(from: string, to: string, names: readonly string[]): Promise<void> {
  await mkdir(to, { recursive: true })
  await run('cp', ['-a', ...names.map((name) => path.join(from, name)), to])
}

/** Until one of the journals holds the key's line (they are appended after the answer). */
async function journaled(dataDir: string, key: string): Promise<void> {
  const dir = path.join(dataDir, 'keys')
  const deadline = Date.now() + 10_000
  for (;;) {
    for (const name of await readdir(dir))
      if ((await readFile(path.join(dir, name), 'utf8')).includes(`"key":"${key}"`)) return
    assert.ok(Date.now() < deadline, `the key ${key} never reached a journal`)
    await sleep(20)
  }
}

function assertReplayOf(replay: TestResponse, first: TestResponse): void {
  assert.equal(replay.status, first.status, replay.text)
  assert.equal(replay.headers.get('idempotent-replayed'), 'true')
  assert.equal(replay.text, first.text)
}

describe('backups of the file store', () => {
  it('a kept key whose change is not in the log (keys/ copied later than events/) is dropped at start, not replayed', {
    timeout: 60_000,
  }, async (t) => {
    const source = await startService(t)
    await source.createUser()
    const copy = path.join(await makeTempDir(t, 'torn-copy-'), 'data')
    await copyEntries(source.dataDir, copy, ['events', 'users', 'checkpoint.json'])
    const json = { email: uniqueEmail('late'), name: 'Made After The Copy' }
    const first = await source.call('POST', '/users', { json, headers: keyed('late-key') })
    assert.equal(first.status, 201, first.text)
    await journaled(source.dataDir, 'late-key')
    await copyEntries(source.dataDir, copy, ['keys', 'tombstones', 'webhooks'])

    const restored = await startService(t, { dataDir: copy })
    const retried = await restored.call('POST', '/users', { json, headers: keyed('late-key') })
    assert.equal(retried.status, 201, retried.text)
    assert.equal(retried.headers.get('idempotent-replayed'), null, 'not a replay')
    const made = retried.json<User>()
    assert.notEqual(made.id, first.json<User>().id)
    assert.equal((await restored.call('GET', `/users/${first.json<User>().id}`)).status, 404)
    assert.equal((await restored.call('GET', `/users/${made.id}`)).status, 200)
    const warned = restored.logs.filter(
      (line) =>
        line['msg'] === 'dropped kept idempotency keys whose change is not in the event log',
    )
    assert.deepEqual(
      warned.map((line) => [line['level'], line['keys']]),
      [['warn', 1]],
    )

    // Dropped for good: the log has grown past the place the line named, and a start after
    // must still not find it, only the key kept by the retry.
    await restored.service.close()
    const again = await startService(t, { dataDir: copy })
    assertReplayOf(
      await again.call('POST', '/users', { json, headers: keyed('late-key') }),
      retried,
    )
    assert.equal(
      again.logs.filter((line) => line['level'] === 'warn' && line['keys'] !== undefined).length,
      0,
    )
  })
})
