import assert from 'node:assert/strict'
import { readdir, readFile, rm, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import type { User } from '../../src/domain/user.js'
import { startChild } from '../helpers/child.js'
import { listLockFiles } from '../helpers/data-files.js'
import { request } from '../helpers/http.js'
import { refusedStart } from '../helpers/refused-start.js'
import { makeTempDir, uniqueEmail } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

/*
 * DATA_DIR/format holds the number of the layout the data directory is written in: a release
 * refuses a later release's layout (going back after an upgrade) instead of serving the directory
 * without what it does not know, such as a revocation.
 */

const token = makeToken()

/** A data directory holding one user, written by a start of this release and stopped cleanly. */
async function dataWithOneUser(t: TestContext): Promise<{ dataDir: string; user: User }> {
  const dataDir = path.join(await makeTempDir(t, 'data-format-'), 'data')
  const child = await startChild({ dataDir })
  t.after(() => child.stop('SIGKILL'))
  const created = await request('POST', `${child.url}/users`, {
    token,
    json: { email: uniqueEmail('format'), name: 'Kept' },
  })
  assert.equal(created.status, 201, created.text)
  assert.equal((await child.stop()).code, 0)
  return { dataDir, user: created.json<User>() }
}

/** Every file of the directory, by its path, with its content. */
async function contents(dir: string): Promise<Map<string, string>> {
  const found = new Map<string, string>()
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue
    const file = path.join(entry.parentPath, entry.name)
    found.set(path.relative(dir, file), await readFile(file, 'latin1'))
  }
  return found
}

describe('the data directory layout', () => {
  it('a first start writes the layout of this release', async (t) => {
    const { dataDir } = await dataWithOneUser(t)
    assert.equal(await readFile(path.join(dataDir, 'format'), 'utf8'), '1\n')
  })

  it("a later release's layout refuses the start, naming the file, and changes nothing", async (t) => {
    const { dataDir, user } = await dataWithOneUser(t)
    await writeFile(path.join(dataDir, 'format'), '2\n')
    const before = await contents(dataDir)
    const stderr = await refusedStart(t, dataDir)
    assert.match(
      stderr,
      /^DataFormatError: .*format: the data directory was written by a later release \(layout 2; this release reads up to 1\)/,
    )
    assert.deepEqual(await contents(dataDir), before, 'nothing written, no lock left')
    assert.deepEqual(listLockFiles(dataDir), [])

    // Put back by the release that wrote it, the directory serves as before.
    await writeFile(path.join(dataDir, 'format'), '1\n')
    const child = await startChild({ dataDir })
    t.after(() => child.stop('SIGKILL'))
    const got = await request('GET', `${child.url}/users/${user.id}`, { token })
    assert.equal(got.status, 200)
    assert.deepEqual(got.json<User>(), user)
  })

  it('a damaged layout file refuses the start', async (t) => {
    const { dataDir } = await dataWithOneUser(t)
    for (const text of ['', 'one\n', '01\n', '1\n\n', ' 1\n', '-1\n', '1e3\n']) {
      await writeFile(path.join(dataDir, 'format'), text)
      const stderr = await refusedStart(t, dataDir)
      assert.match(stderr, /^DataFormatError: .*format is damaged/, JSON.stringify(text))
      assert.equal(await readFile(path.join(dataDir, 'format'), 'utf8'), text)
    }
  })

  it('a directory of a release from before the file gets it, serves as before, and loses the temp file of a cut write', async (t) => {
    const { dataDir, user } = await dataWithOneUser(t)
    await rm(path.join(dataDir, 'format'))
    await writeFile(path.join(dataDir, '.format.abc1.tmp'), '1')
    const child = await startChild({ dataDir })
    t.after(() => child.stop('SIGKILL'))
    const got = await request('GET', `${child.url}/users/${user.id}`, { token })
    assert.deepEqual(got.json<User>(), user)
    assert.equal(await readFile(path.join(dataDir, 'format'), 'utf8'), '1\n')
    assert.ok(!(await readdir(dataDir)).includes('.format.abc1.tmp'))
  })
})
