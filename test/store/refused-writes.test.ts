import assert from 'node:assert/strict'
import { readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { constants } from 'node:os'
import path from 'node:path'
import { describe, it } from 'node:test'

import type { User } from '../../src/domain/user.js'
import { type ChildOptions, type RunningChild, startChild } from '../helpers/child.js'
import { assertProblem, request, type TestResponse } from '../helpers/http.js'
import { waitFor } from '../helpers/ops.js'
import { uniqueEmail } from '../helpers/service.js'
import { compileShim, shimEnv } from '../helpers/syscall-shim.js'
import { fillDisk, type Later, makeWorld, tmpfsWorld } from '../helpers/tmpfs-world.js'
import { makeToken } from '../helpers/tokens.js'

const token = makeToken()
const shim = compileShim()
/** tmpfs hands out space a page at a time. */
const PAGE = 4096
/** The length of a void record's line (`{"void":"<16 hex>"}` and its newline). */
const VOID_LINE = 28

async function start(options: ChildOptions, later: Later): Promise<RunningChild> {
  const child = await startChild(options)
  later(() => child.stop('SIGKILL'))
  return child
}

async function stopCleanly(child: RunningChild): Promise<void> {
  assert.deepEqual(await child.stop('SIGTERM'), { code: 0, signal: null }, child.stderr())
}

/** The one segment of the log and its size in bytes. */
function segmentBytes(dataDir: string): number {
  const dir = path.join(dataDir, 'events')
  const names = readdirSync(dir).filter((name) => name.endsWith('.ndjson'))
  assert.equal(names.length, 1, `one segment: ${names.join(', ')}`)
  return statSync(path.join(dir, names[0] ?? '')).size
}

/** What GET shows of a user: status, ETag and body. */
async function shown(url: string, id: string): Promise<string> {
  const res = await request('GET', `${url}/users/${id}`, { token })
  return `${res.status} ${res.headers.get('etag') ?? ''} ${res.text}`
}

/** Metadata whose JSON is exactly `length` characters long (100 to 4,600), always 9 keys. */
function metadataOfLength(length: number): Record<string, string> {
  const count = 9
  const keys = Array.from({ length: count }, (_, i) => `k${i}`)
  const overhead = JSON.stringify(Object.fromEntries(keys.map((key) => [key, '']))).length
  const chars = length - overhead
  return Object.fromEntries(
    keys.map((key, i) => [
      key,
      'x'.repeat(Math.floor(chars / count) + (i < chars % count ? 1 : 0)),
    ]),
  )
}

/** A PATCH of the name and of metadata whose JSON is `pad` characters long. */
function patch(url: string, id: string, name: string, pad: number): Promise<TestResponse> {
  const metadata = metadataOfLength(pad)
  assert.equal(JSON.stringify(metadata).length, pad)
  return request('PATCH', `${url}/users/${id}`, { token, json: { name, metadata } })
}

describe('a refused write stays refused, a committed one stays made, across a clean restart', () => {
  it('on a full disk, a PATCH whose event would still fit in the log is answered as what a restart then shows', {
    timeout: 60_000,
  }, async (t) => {
    const world = await tmpfsWorld(t)
    if (typeof world === 'string') return t.skip(world)
    const { mount, dataDir, later } = world
    const child = await start({ dataDir }, later)
    const res = await request('POST', `${child.url}/users`, {
      token,
      json: { email: uniqueEmail('full-patch'), name: 'First' },
    })
    assert.equal(res.status, 201, res.text)
    const { id } = res.json<User>()

    // One PATCH measures its event's line; the next ones place the refused PATCH's event so that
    // it fits in the last page of the segment with no room left for a void record after it.
    let before = segmentBytes(dataDir)
    const measured = await patch(child.url, id, 'Name A', 100)
    assert.equal(measured.status, 200, measured.text)
    const line = segmentBytes(dataDir) - before
    let pad = 0
    let name = 'Name B'
    for (;;) {
      before = segmentBytes(dataDir)
      const room = PAGE - (before % PAGE)
      pad = 100 + room - (VOID_LINE - 4) - line
      if (pad >= 100) break
      // Too little room in this page: a larger event moves the log into the next one.
      const moved = await patch(child.url, id, name, 100 + room)
      assert.equal(moved.status, 200, moved.text)
      name = name === 'Name A' ? 'Name B' : 'Name A'
    }
    const view = await shown(child.url, id)

    fillDisk(path.join(mount, 'filler'))
    const answer = await patch(child.url, id, name, pad)
    const afterAnswer = await shown(child.url, id)
    if (answer.status === 503) {
      const problem = assertProblem(answer, 503, 'storage_unavailable')
      assert.match(answer.headers.get('retry-after') ?? '', /^\d+$/)
      assert.equal(problem.outcome, undefined, `a full disk is a definite refusal: ${answer.text}`)
      assert.equal(afterAnswer, view, 'the refused change is not shown')
    } else {
      assert.equal(answer.status, 200, answer.text)
      assert.equal(afterAnswer, `200 ${answer.headers.get('etag') ?? ''} ${answer.text}`)
    }

    rmSync(path.join(mount, 'filler'))
    await stopCleanly(child)
    const restarted = await start({ dataDir }, later)
    assert.equal(
      await shown(restarted.url, id),
      afterAnswer,
      `a clean restart shows what the ${answer.status} answer said`,
    )
  })

  it("answers 503 with outcome unknown when the log's fdatasync fails, and no outcome on other refusals", {
    timeout: 60_000,
  }, async (t) => {
    if (shim.skip !== undefined) return t.skip(shim.skip)
    const { root, dataDir, later } = await makeWorld(t, 'refused-writes-')
    const marker = path.join(root, 'fail-fsync')
    const env = shimEnv(shim.library, {
      failMarker: marker,
      failKind: 'file',
      failErrno: constants.errno.EIO,
      failUnder: path.join(dataDir, 'events'),
    })
    const child = await start({ dataDir, env: { ...env, CHECKPOINT_MS: '3600000' } }, later)
    const res = await request('POST', `${child.url}/users`, {
      token,
      json: { email: uniqueEmail('unknown'), name: 'Known' },
    })
    assert.equal(res.status, 201, res.text)
    const { id } = res.json<User>()
    const view = await shown(child.url, id)

    writeFileSync(marker, '')
    const refused = await request('PATCH', `${child.url}/users/${id}`, {
      token,
      json: { name: 'Maybe' },
    })
    const problem = assertProblem(refused, 503, 'storage_unavailable')
    assert.match(refused.headers.get('retry-after') ?? '', /^\d+$/)
    assert.equal(problem.outcome, 'unknown', refused.text)
    assert.match(problem.detail, /unknown/)
    assert.equal(await shown(child.url, id), view, 'memory does not show the change meanwhile')

    // The store is read-only now: later refusals are definite (nothing was tried).
    const later503 = await request('PATCH', `${child.url}/users/${id}`, {
      token,
      json: { name: 'Never' },
    })
    const definite = assertProblem(later503, 503, 'storage_unavailable')
    assert.equal(definite.outcome, undefined, later503.text)
    rmSync(marker)
    await stopCleanly(child)

    // Either outcome is allowed after a restart, but only these two.
    const restarted = await start({ dataDir }, later)
    const after = await request('GET', `${restarted.url}/users/${id}`, { token })
    assert.equal(after.status, 200, after.text)
    assert.ok(['Known', 'Maybe'].includes(after.json<User>().name), after.text)
  })

  it('answers 200 for a PATCH whose rename fails once its event is durable, shows it, and keeps it after a clean restart', {
    timeout: 60_000,
  }, async (t) => {
    if (shim.skip !== undefined) return t.skip(shim.skip)
    const { root, dataDir, later } = await makeWorld(t, 'refused-writes-')
    const marker = path.join(root, 'fail-rename')
    const env = shimEnv(shim.library, {
      failRenameMarker: marker,
      failErrno: constants.errno.ENOSPC,
      failUnder: path.join(dataDir, 'users'),
    })
    const child = await start({ dataDir, env }, later)
    const res = await request('POST', `${child.url}/users`, {
      token,
      json: { email: uniqueEmail('committed'), name: 'Before' },
    })
    assert.equal(res.status, 201, res.text)
    const { id } = res.json<User>()
    const file = path.join(dataDir, 'users', `${id}.json`)
    const before = readFileSync(file, 'utf8')

    writeFileSync(marker, '')
    const answer = await request('PATCH', `${child.url}/users/${id}`, {
      token,
      json: { name: 'Committed' },
    })
    assert.equal(answer.status, 200, answer.text)
    assert.equal(answer.headers.get('etag'), '"v2"')
    assert.deepEqual([answer.json<User>().name, answer.json<User>().version], ['Committed', 2])
    const view = `200 ${answer.headers.get('etag') ?? ''} ${answer.text}`
    assert.equal(await shown(child.url, id), view, 'GET shows what the answer said')
    assert.equal(readFileSync(file, 'utf8'), before, 'the file was not renamed: the log holds it')
    const ready = await request('GET', `${child.url}/readyz`)
    assertProblem(ready, 503, 'storage_unavailable')
    const fault = await waitFor('the error line', () =>
      child
        .stdout()
        .split('\n')
        .find((line) => line.includes('a committed change could not be written')),
    )
    const logged = JSON.parse(fault) as Record<string, unknown>
    assert.deepEqual(
      [logged['level'], logged['requestId'], logged['userId'], logged['step'], logged['code']],
      ['error', answer.headers.get('x-request-id'), id, 'rename', 'ENOSPC'],
    )

    rmSync(marker)
    await stopCleanly(child)
    const restarted = await start({ dataDir }, later)
    assert.equal(await shown(restarted.url, id), view, 'a clean restart shows the 200 answer')
    assert.equal(JSON.parse(readFileSync(file, 'utf8')).version, 2, 'the replay wrote the file')
  })
})
