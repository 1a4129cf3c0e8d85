import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { watch } from 'node:fs'
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { describe, it } from 'node:test'
import { promisify } from 'node:util'

import type { User } from '../../src/domain/user.js'
import { FileStore } from '../../src/store/file/file-store.js'
import { sleep } from '../helpers/child.js'
import { request, type TestResponse } from '../helpers/http.js'
import { makeTempDir, startService, type TestService, uniqueEmail } from '../helpers/service.js'

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

/**
 * Until `checkpoint.json` and the listing of `users/` have stayed the same for two seconds (twice
 * CHECKPOINT_MS): the last checkpoint has written the imported users' files and moved past them.
 */
async function settled(dataDir: string): Promise<void> {
  const look = async (): Promise<string> =>
    JSON.stringify([
      await readFile(path.join(dataDir, 'checkpoint.json'), 'utf8'),
      (await readdir(path.join(dataDir, 'users'))).sort(),
    ])
  let seen = await look()
  let since = Date.now()
  const deadline = since + 30_000
  while (Date.now() - since < 2000) {
    assert.ok(Date.now() < deadline, 'the data directory never stopped changing in maintenance')
    await sleep(100)
    const now = await look()
    if (now !== seen) {
      seen = now
      since = Date.now()
    }
  }
}

/** The names changed in a directory during `ms`. */
async function changesIn(dir: string, ms: number): Promise<string[]> {
  const changed: string[] = []
  const watcher = watch(dir, (_, name) => {
    changed.push(String(name))
  })
  await sleep(ms)
  watcher.close()
  return changed
}

async function readyzCode(service: TestService): Promise<string | undefined> {
  const res = await request('GET', `${service.url}/readyz`)
  return res.status === 503 ? (res.json<{ code?: string }>().code ?? 'unknown') : undefined
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

  it('a copy taken in maintenance holds every key answered and every user imported before it', {
    timeout: 120_000,
  }, async (t) => {
    const source = await startService(t)
    let writing = true
    // An import that runs until the copy is taken: its lines after maintenance are refused.
    let sent = 0
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        if (!writing) {
          controller.close()
          return
        }
        const lines = Array.from({ length: 50 }, () => {
          sent += 1
          return `${JSON.stringify({ email: uniqueEmail('imported'), name: `Imported ${sent}` })}\n`
        })
        controller.enqueue(Buffer.from(lines.join('')))
        await sleep(10)
      },
    })
    const importing = fetch(`${source.baseUrl}/users:import`, {
      method: 'POST',
      headers: { authorization: `Bearer ${source.token}`, 'content-type': 'application/x-ndjson' },
      body,
      duplex: 'half',
    } as RequestInit).then((res) => res.text())
    const answered: { key: string; json: object; first: TestResponse }[] = []
    const writer = async (w: number): Promise<void> => {
      for (let n = 0; writing; n += 1) {
        const key = `writer-${w}-${n}`
        const json = { email: uniqueEmail(key), name: `Keyed ${key}` }
        const first = await source.call('POST', '/users', { json, headers: keyed(key) })
        if (first.status === 201) answered.push({ key, json, first })
        else assert.equal(first.status, 503, first.text)
      }
    }
    const writers = [0, 1, 2, 3].map(writer)
    await sleep(300)

    // The procedure of docs/operations.md: enter maintenance, wait until /readyz says so and the
    // last checkpoint is over, copy, leave maintenance.
    const maintenance = path.join(source.dataDir, 'maintenance')
    await writeFile(maintenance, '')
    while ((await readyzCode(source)) !== 'maintenance') await sleep(50)
    await settled(source.dataDir)
    // The import still sends lines: refused before any file is written, they change nothing.
    assert.deepEqual(await changesIn(path.join(source.dataDir, 'users'), 1000), [])
    const copy = path.join(await makeTempDir(t, 'maintenance-copy-'), 'data')
    await run('cp', ['-a', source.dataDir, copy])
    writing = false
    await Promise.all(writers)
    const imported = (await importing)
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line) as { status: number; id?: string; code?: string })
    await rm(maintenance)
    for (const name of await readdir(copy))
      if (name === 'maintenance' || name.startsWith('.lock')) await rm(path.join(copy, name))

    assert.ok(answered.length > 0, 'keyed writes were answered before maintenance')
    const ids = imported.filter((line) => line.status === 201).map((line) => line.id)
    assert.ok(ids.length > 0, 'users were imported before maintenance')
    assert.ok(
      imported.some((line) => line.code === 'maintenance'),
      'the import still ran when maintenance began',
    )
    const restored = await startService(t, { dataDir: copy })
    const users = new Set((await restored.snapshot()).map((user) => user.id))
    for (const id of ids) assert.ok(id !== undefined && users.has(id), `imported user ${id}`)
    for (const { key, json, first } of answered) {
      assertReplayOf(await restored.call('POST', '/users', { json, headers: keyed(key) }), first)
      assert.ok(users.has(first.json<User>().id), `the user of ${key}`)
    }
  })

  it('in maintenance, expired keys stay in their journal and in the event log until it ends', {
    timeout: 60_000,
  }, async (t) => {
    const dataDir = path.join(await makeTempDir(t), 'data')
    let clock = Date.now()
    const now = (): number => clock
    const maintenance = path.join(dataDir, 'maintenance')
    const store = new FileStore({ dataDir, now, keySweepMs: 50 })
    const source = await startService(t, {
      store,
      now,
      idempotencyTtlS: 1,
      maintenanceFile: maintenance,
    })
    const json = { email: uniqueEmail('swept'), name: 'Swept' }
    assert.equal(
      (await source.call('POST', '/users', { json, headers: keyed('swept') })).status,
      201,
    )
    await journaled(dataDir, 'swept')
    const look = async (): Promise<string> => {
      const events = path.join(dataDir, 'events')
      const segments = (await readdir(events)).sort()
      const texts = await Promise.all(segments.map((name) => readFile(path.join(events, name))))
      return JSON.stringify([(await readdir(path.join(dataDir, 'keys'))).sort(), segments, texts])
    }

    await writeFile(maintenance, '')
    while ((await readyzCode(source)) !== 'maintenance') await sleep(50)
    const before = await look()
    // The key expires, and the event segments pass the retention: a backup is being copied.
    clock += 40 * 86_400_000
    await sleep(1500)
    assert.equal(await look(), before, 'nothing in keys/ or events/ changed in maintenance')

    await rm(maintenance)
    while ((await readyzCode(source)) !== undefined) await sleep(50)
    const deadline = Date.now() + 10_000
    while ((await readdir(path.join(dataDir, 'keys'))).length > 0) {
      assert.ok(Date.now() < deadline, 'the expired journal is deleted once maintenance ends')
      await sleep(50)
    }
  })
})
