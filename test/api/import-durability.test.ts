/**
 * An import on the file store leaves its new users' files to the checkpoint (docs/events.md): each
 * line is acknowledged once its event is durable in the log. These tests SIGKILL the service
 * before any checkpoint, cut the power (the files a power loss may lose), and change imported
 * users before their files are written: every acknowledged line must be whole after a restart,
 * and no older content may land over a newer one.
 */
import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'

import { LOADED_LINE, type RunningChild, startChild, waitForOutput } from '../helpers/child.js'
import { assertProblem, request, type UserPage } from '../helpers/http.js'
import { makeTempDir, uniqueEmail } from '../helpers/service.js'
import { compileShim, shimEnv } from '../helpers/syscall-shim.js'
import { makeToken } from '../helpers/tokens.js'
import {
  checkFiles,
  readCheckpointFile,
  readLog,
  revertPastCheckpoint,
} from '../helpers/wal-disk.js'

/** Long enough that no checkpoint runs on its timer while a test runs. */
const NO_CHECKPOINT = String(3_600_000)
const USERS = 300
const token = makeToken()

interface Result {
  readonly line: number
  readonly status: number
  readonly id?: string
  readonly code?: string
}

async function importLines(service: RunningChild, lines: readonly string[]): Promise<Result[]> {
  const res = await fetch(`${service.url}/users:import`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/x-ndjson' },
    body: `${lines.join('\n')}\n`,
  })
  const text = await res.text()
  assert.equal(res.status, 200, text)
  assert.equal(res.headers.get('content-type'), 'application/x-ndjson')
  return text
    .trimEnd()
    .split('\n')
    .map((line) => JSON.parse(line) as Result)
}

/** USERS new users, a line that is not JSON, and a second use of the first email. */
function importBody(): string[] {
  const emails = Array.from({ length: USERS }, (_, n) => uniqueEmail(`imported${n}`))
  return [
    ...emails.map((email, n) =>
      JSON.stringify({ email, name: `Imported ${n}`, metadata: { n: String(n) } }),
    ),
    '{"email": ',
    JSON.stringify({ email: emails[0], name: 'Twice' }),
  ]
}

/** Imports, checks the results, and reads every created user back at once (served from memory). */
async function importAndRead(
  service: RunningChild,
): Promise<{ ids: string[]; shown: Map<string, unknown> }> {
  const results = await importLines(service, importBody())
  assert.equal(results.length, USERS + 2)
  const created = results.slice(0, USERS)
  assert.ok(
    created.every((result) => result.status === 201),
    JSON.stringify(created.find((r) => r.status !== 201)),
  )
  assert.deepEqual(
    results.slice(USERS).map((result) => [result.status, result.code]),
    [
      [400, 'bad_request'],
      [409, 'duplicate_email'],
    ],
  )
  const ids = created.map((result) => result.id ?? '')
  const shown = new Map<string, unknown>()
  for (const id of ids) {
    const res = await request('GET', `${service.url}/users/${id}`, { token })
    assert.equal(res.status, 200, res.text)
    shown.set(id, res.body)
  }
  return { ids, shown }
}

/** Every user as acknowledged, over HTTP and in its file, and the count with nothing more. */
async function assertWhole(
  service: RunningChild,
  dataDir: string,
  shown: ReadonlyMap<string, unknown>,
): Promise<void> {
  for (const [id, body] of shown) {
    const res = await request('GET', `${service.url}/users/${id}`, { token })
    assert.equal(res.status, 200, `${id}: ${res.text}`)
    assert.deepEqual(res.body, body, `${id} is not as acknowledged`)
  }
  let listed = 0
  for (let cursor: string | null = ''; cursor !== null; ) {
    const after = cursor === '' ? '' : `&cursor=${encodeURIComponent(cursor)}`
    const page = await request('GET', `${service.url}/users?limit=100${after}`, { token })
    assert.equal(page.status, 200, page.text)
    const body = page.json<UserPage>()
    listed += body.items.length
    cursor = body.nextCursor
  }
  assert.equal(listed, shown.size)
  assert.equal((await service.stop()).code, 0)
  checkFiles(dataDir, 'after the restart')
  for (const [id, body] of shown) {
    const file = JSON.parse(readFileSync(path.join(dataDir, 'users', `${id}.json`), 'utf8'))
    assert.deepEqual(file, body, `the file of ${id}`)
  }
  assert.equal(readCheckpointFile(dataDir), readLog(dataDir).highest)
}

const userFiles = (dataDir: string): string[] =>
  readdirSync(path.join(dataDir, 'users')).filter((name) => name.endsWith('.json'))

describe('an import on the file store', () => {
  it('is whole after a SIGKILL before any checkpoint: the log alone held its users', {
    timeout: 60_000,
  }, async (t) => {
    const dataDir = path.join(await makeTempDir(t, 'import-kill-'), 'data')
    const service = await startChild({ dataDir, env: { CHECKPOINT_MS: NO_CHECKPOINT } })
    t.after(() => service.stop('SIGKILL'))
    const { ids, shown } = await importAndRead(service)
    // Acknowledged and served, their files not written yet: the checkpoint writes them.
    assert.deepEqual(userFiles(dataDir), [])
    assert.equal((await service.stop('SIGKILL')).signal, 'SIGKILL')

    const again = await startChild({ dataDir })
    t.after(() => again.stop('SIGKILL'))
    await waitForOutput(again, LOADED_LINE)
    assert.match(again.stdout(), /replayed the event log past its checkpoint/)
    assert.equal(ids.length, USERS)
    await assertWhole(again, dataDir, shown)
  })

  it('is whole after a power cut: files renamed past the checkpoint lost, the synced log kept', {
    timeout: 60_000,
  }, async (t) => {
    const dataDir = path.join(await makeTempDir(t, 'import-power-'), 'data')
    const service = await startChild({ dataDir, env: { CHECKPOINT_MS: NO_CHECKPOINT } })
    t.after(() => service.stop('SIGKILL'))
    const { ids, shown } = await importAndRead(service)
    // A later change of one imported user writes its owed file first, then its own.
    const changed = ids[1] ?? ''
    const patched = await request('PATCH', `${service.url}/users/${changed}`, {
      token,
      json: { name: 'Changed After Import' },
      contentType: 'application/merge-patch+json',
    })
    assert.equal(patched.status, 200, patched.text)
    shown.set(changed, patched.body)
    assert.deepEqual(userFiles(dataDir), [`${changed}.json`])
    await service.stop('SIGKILL')
    // What a power loss may leave: nothing renamed past the checkpoint (here, no user file).
    assert.equal(revertPastCheckpoint(dataDir), USERS)
    assert.deepEqual(userFiles(dataDir), [])

    const again = await startChild({ dataDir })
    t.after(() => again.stop('SIGKILL'))
    await waitForOutput(again, LOADED_LINE)
    await assertWhole(again, dataDir, shown)
  })

  it('writes each file once the checkpoint runs, never an older content over a change made since', {
    timeout: 60_000,
  }, async (t) => {
    const dataDir = path.join(await makeTempDir(t, 'import-change-'), 'data')
    const service = await startChild({ dataDir, env: { CHECKPOINT_MS: NO_CHECKPOINT } })
    t.after(() => service.stop('SIGKILL'))
    const { ids, shown } = await importAndRead(service)
    const [updated = '', deleted = '', revoked = ''] = ids
    const patched = await request('PATCH', `${service.url}/users/${updated}`, {
      token,
      json: { metadata: { n: 'changed' } },
      contentType: 'application/merge-patch+json',
    })
    assert.equal(patched.status, 200, patched.text)
    shown.set(updated, patched.body)
    const gone = await request('DELETE', `${service.url}/users/${deleted}`, { token })
    assert.equal(gone.status, 204, gone.text)
    shown.delete(deleted)
    const revoke = await request('POST', `${service.url}/users/${revoked}:revokeTokens`, { token })
    assert.equal(revoke.status, 200, revoke.text)
    shown.set(revoked, revoke.body)
    // A clean stop runs the last checkpoint: it writes the owed files, the changed ones excepted.
    assert.equal((await service.stop()).code, 0)
    assert.equal(userFiles(dataDir).length, USERS - 1)
    assert.equal(existsSync(path.join(dataDir, 'users', `${deleted}.json`)), false)
    assert.equal(readCheckpointFile(dataDir), readLog(dataDir).highest)

    const again = await startChild({ dataDir })
    t.after(() => again.stop('SIGKILL'))
    await waitForOutput(again, LOADED_LINE)
    assert.doesNotMatch(again.stdout(), /replayed the event log past its checkpoint/)
    assertProblem(
      await request('GET', `${again.url}/users/${deleted}`, { token }),
      404,
      'not_found',
    )
    await assertWhole(again, dataDir, shown)
  })

  it("turns read-only when the checkpoint's fsync of an owed file fails, claims nothing, and the restart writes every file", {
    timeout: 60_000,
  }, async (t) => {
    const shim = compileShim()
    if (shim.skip !== undefined) return t.skip(shim.skip)
    const root = await makeTempDir(t, 'import-fsync-')
    const dataDir = path.join(root, 'data')
    const marker = path.join(root, 'fail-fsync')
    const failing = shimEnv(shim.library, {
      failMarker: marker,
      failKind: 'file',
      failUnder: path.join(dataDir, 'users'),
    })
    const service = await startChild({ dataDir, env: { CHECKPOINT_MS: '100', ...failing } })
    t.after(() => service.stop('SIGKILL'))
    const through = readCheckpointFile(dataDir)
    writeFileSync(marker, '')
    const { shown } = await importAndRead(service)
    const deadline = Date.now() + 20_000
    while ((await fetch(`${service.url}/readyz`)).status !== 503) {
      assert.ok(Date.now() < deadline, 'the store never turned read-only')
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    rmSync(marker)
    await waitForOutput(service, 'a checkpoint failed')
    const failed = service
      .stdout()
      .split('\n')
      .filter((line) => line.includes('a checkpoint failed'))
      .map((line) => JSON.parse(line) as Record<string, unknown>)
    assert.deepEqual(
      failed.map((line) => [line['level'], line['msg'], line['step']]),
      [['error', 'a checkpoint failed: the store turned read-only', 'file-sync']],
    )
    assert.equal(readCheckpointFile(dataDir), through, 'the failed checkpoint claimed the import')
    // Every line was answered and is still served from memory.
    for (const [id, body] of shown) {
      const res = await request('GET', `${service.url}/users/${id}`, { token })
      assert.deepEqual(res.body, body)
    }
    assert.equal((await service.stop()).code, 0)
    assert.equal(readCheckpointFile(dataDir), through, 'the stop claimed the import')

    const again = await startChild({ dataDir })
    t.after(() => again.stop('SIGKILL'))
    await waitForOutput(again, LOADED_LINE)
    assert.match(again.stdout(), /replayed the event log past its checkpoint/)
    await assertWhole(again, dataDir, shown)
  })
})
