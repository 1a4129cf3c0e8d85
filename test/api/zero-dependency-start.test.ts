import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { copyFile, mkdir, readdir } from 'node:fs/promises'
import path from 'node:path'
import { describe, it } from 'node:test'
import { promisify } from 'node:util'

import type { User } from '../../src/domain/user.js'
import { PROJECT_ROOT, sleep, spawnService } from '../helpers/child.js'
import { listLockFiles } from '../helpers/data-files.js'
import { request } from '../helpers/http.js'
import { makeTempDir, uniqueEmail } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

const run = promisify(execFile)

/** True when a node_modules folder sits in `dir` or any folder above it. */
function hasNodeModulesAbove(dir: string): boolean {
  for (let current = dir; ; current = path.dirname(current)) {
    if (existsSync(path.join(current, 'node_modules'))) return true
    if (path.dirname(current) === current) return false
  }
}

/** The environment minus NODE_V8_COVERAGE: the compiler's own coverage is of no interest. */
function withoutCoverage(): NodeJS.ProcessEnv {
  const env = { ...process.env }
  delete env['NODE_V8_COVERAGE']
  return env
}

describe('node dist/main.js with no node_modules', () => {
  it('builds, starts with plain node, serves /healthz and POST /users, and exits 0 on SIGTERM', {
    timeout: 90_000,
  }, async (t) => {
    const tmp = await makeTempDir(t, 'user-service-dist-')
    const app = path.join(tmp, 'app')
    const dataDir = path.join(tmp, 'data')
    await mkdir(app)
    assert.equal(hasNodeModulesAbove(app), false, `a node_modules folder is visible from ${app}`)

    await run(
      process.execPath,
      [
        path.join('node_modules', 'typescript', 'bin', 'tsc'),
        '-p',
        'tsconfig.build.json',
        '--outDir',
        path.join(app, 'dist'),
        '--tsBuildInfoFile',
        path.join(tmp, 'tsbuildinfo'),
      ],
      { cwd: PROJECT_ROOT, timeout: 60_000, env: withoutCoverage() },
    )
    await copyFile(path.join(PROJECT_ROOT, 'package.json'), path.join(app, 'package.json'))
    assert.deepEqual((await readdir(app)).sort(), ['dist', 'package.json'])
    assert.ok(existsSync(path.join(app, 'dist', 'main.js')))
    assert.ok(existsSync(path.join(app, 'dist', 'bin.js')))
    assert.ok(
      existsSync(path.join(app, 'dist', 'index.d.ts')),
      'the build writes type declarations',
    )

    const child = spawnService({ dataDir, cwd: app, args: [path.join('dist', 'main.js')] })
    t.after(() => {
      if (child.proc.exitCode === null) child.proc.kill('SIGKILL')
    })
    const deadline = Date.now() + 15_000
    let url: string | undefined
    while (url === undefined) {
      url = /"msg":"listening","url":"([^"]+)"/.exec(child.stdout())?.[1]
      if (url !== undefined) break
      assert.equal(child.proc.exitCode, null, `the service exited:\n${child.stderr()}`)
      assert.ok(Date.now() < deadline, `no listening line:\n${child.stderr()}`)
      await sleep(20)
    }
    assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/)

    const health = await request('GET', `${url}/healthz`)
    assert.equal(health.status, 200)
    let ready = await request('GET', `${url}/readyz`)
    while (ready.status !== 200 && Date.now() < deadline) {
      await sleep(20)
      ready = await request('GET', `${url}/readyz`)
    }
    assert.equal(ready.status, 200)

    const email = uniqueEmail('dist')
    const created = await request('POST', `${url}/users`, {
      token: makeToken(),
      json: { email, name: 'Plain Node' },
    })
    assert.equal(created.status, 201, created.text)
    const user = created.json<User>()
    assert.equal(user.email, email)
    assert.deepEqual(await readdir(path.join(dataDir, 'users')), [`${user.id}.json`])

    child.proc.kill('SIGTERM')
    const { code } = await child.exited
    assert.equal(code, 0, child.stderr())
    assert.deepEqual(listLockFiles(dataDir), [])
  })
})
