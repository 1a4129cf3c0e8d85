import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { copyFile, cp, mkdir, readFile, symlink, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { describe, it } from 'node:test'
import { promisify } from 'node:util'

import { startTestService, type User } from '../src/testing.js'
import { ADMIN_CSP } from './helpers/admin-page.js'
import { PROJECT_ROOT } from './helpers/child.js'
import { makeTempDir } from './helpers/service.js'

const run = promisify(execFile)
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm'

/** The environment minus what the outer test run and npm set: the inner tools run as a user's would. */
function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {}
  for (const [name, value] of Object.entries(process.env)) {
    if (
      name === 'NODE_TEST_CONTEXT' ||
      name === 'NODE_V8_COVERAGE' ||
      name === 'NODE_OPTIONS' ||
      name.startsWith('npm_')
    )
      continue
    env[name] = value
  }
  return env
}

interface PackResult {
  filename: string
  files: { path: string }[]
}

describe('the packed package (npm pack) in another project', () => {
  it("installs from the tarball and passes the example consumer's node --test suite", {
    timeout: 150_000,
  }, async (t) => {
    const tmp = await makeTempDir(t, 'user-service-pack-')
    const stage = path.join(tmp, 'stage')
    const env = cleanEnv()
    // The package exactly as `npm pack` in the repository makes it: its own prepack script builds
    // it (npm run build: the service, then the admin page), in a staging copy of the sources so
    // that the repository's own dist/ is left alone.
    await mkdir(stage)
    for (const file of ['package.json', 'tsconfig.json', 'tsconfig.build.json']) {
      await copyFile(path.join(PROJECT_ROOT, file), path.join(stage, file))
    }
    for (const folder of ['src', 'admin', 'scripts']) {
      await cp(path.join(PROJECT_ROOT, folder), path.join(stage, folder), { recursive: true })
    }
    // The build's tools (tsc, the Node types) are the repository's.
    await symlink(path.join(PROJECT_ROOT, 'node_modules'), path.join(stage, 'node_modules'), 'dir')
    // What `npm run build:bundle` and `npm run build:sea` leave in dist/ of a checkout is not
    // the package's: the bundle is 0.7 MB that the package's own dist/bin.js already is.
    await mkdir(path.join(stage, 'dist', 'sea'), { recursive: true })
    await writeFile(path.join(stage, 'dist', 'user-service.mjs'), '// npm run build:bundle\n')
    await writeFile(path.join(stage, 'dist', 'sea', 'user-service.cjs'), '// npm run build:sea\n')
    const packed = await run(NPM, ['pack', '--json', '--pack-destination', tmp], {
      cwd: stage,
      env,
      timeout: 90_000,
    })
    // Some npm versions print the prepack script's banner on stdout, before the JSON.
    const json = packed.stdout.startsWith('[')
      ? packed.stdout
      : packed.stdout.slice(packed.stdout.indexOf('\n[') + 1)
    const [pack] = JSON.parse(json) as PackResult[]
    assert.ok(pack, packed.stdout)
    const shipped = pack.files.map((file) => file.path)
    for (const file of [
      'package.json',
      'dist/index.js',
      'dist/index.d.ts',
      'dist/testing.js',
      'dist/testing.d.ts',
      'dist/bin.js',
      'dist/bin.js.map',
      'dist/main.js',
      'dist/admin/index.html',
      'dist/admin/main.js',
      'dist/admin/admin.css',
      'dist/admin/icon.svg',
    ]) {
      assert.ok(
        shipped.includes(file),
        `${file} is not among the ${shipped.length} files of the tarball`,
      )
    }
    assert.equal(
      shipped.some((file) => file.startsWith('src/') || file.startsWith('test/')),
      false,
    )
    assert.deepEqual(
      shipped.filter((file) => file.startsWith('dist/sea/') || file === 'dist/user-service.mjs'),
      [],
    )

    // The command is one module (npm run build bundles it): it imports none of dist/'s others.
    const bin = await readFile(path.join(stage, 'dist', 'bin.js'), 'utf8')
    // (The admin page's own modules are carried in it as strings, hence the line's start.)
    assert.doesNotMatch(bin, /^(?:import|export)\b[^\n]*from\s*["']\.\.?\//m)
    assert.doesNotMatch(bin, /\bimport\(\s*["']\.\.?\//)

    const consumer = path.join(tmp, 'consumer')
    await cp(path.join(PROJECT_ROOT, 'examples', 'consumer'), consumer, {
      recursive: true,
      filter: (source) => !source.includes(`${path.sep}node_modules`),
    })
    const manifestFile = path.join(consumer, 'package.json')
    const manifest = JSON.parse(await readFile(manifestFile, 'utf8')) as {
      devDependencies: Record<string, string>
    }
    manifest.devDependencies['user-service'] = `file:${path.join(tmp, pack.filename)}`
    await writeFile(manifestFile, JSON.stringify(manifest, null, 2))
    // The tarball has no runtime dependencies, so it installs offline; online is the fallback.
    const install = ['install', '--no-audit', '--no-fund', '--no-package-lock']
    await run(NPM, [...install, '--offline'], { cwd: consumer, env, timeout: 60_000 }).catch(() =>
      run(NPM, install, { cwd: consumer, env, timeout: 60_000 }),
    )

    const tested = await run(process.execPath, ['--test', '--test-reporter=spec'], {
      cwd: consumer,
      env,
      timeout: 60_000,
    }).catch((error: { stdout?: string; stderr?: string }) => {
      assert.fail(`the consumer's tests failed:\n${error.stdout ?? ''}\n${error.stderr ?? ''}`)
    })
    assert.match(tested.stdout, /pass 3\b/, tested.stdout)
    assert.match(tested.stdout, /fail 0\b/, tested.stdout)

    // The installed package serves the admin page from its own dist/admin/.
    await writeFile(
      path.join(consumer, 'admin-page.mjs'),
      `import { startTestService } from 'user-service/testing'
const service = await startTestService()
const answers = []
for (const file of ['admin', 'admin/main.js', 'admin/admin.css', 'admin/icon.svg']) {
  const res = await fetch(service.url + '/' + file)
  answers.push([file, res.status, res.headers.get('content-security-policy')])
}
await service.close()
console.log(JSON.stringify(answers))
`,
    )
    const page = await run(process.execPath, ['admin-page.mjs'], { cwd: consumer, env })
    const answers = JSON.parse(page.stdout) as [string, number, string | null][]
    assert.deepEqual(
      answers.map(([file, status, csp]) => [file, status, csp === ADMIN_CSP]),
      ['admin', 'admin/main.js', 'admin/admin.css', 'admin/icon.svg'].map((file) => [
        file,
        200,
        true,
      ]),
    )

    // The package's bin, as docs/bulk.md runs it: `user-service export` against a service.
    const service = await startTestService()
    t.after(service.close)
    const [ada] = await service.seed([{ name: 'Ada Lovelace' }])
    assert.ok(ada)
    const exported = await run(
      path.join(consumer, 'node_modules', '.bin', 'user-service'),
      ['export', '--url', service.url, '--token', service.token(['users:admin'])],
      { cwd: consumer, env, timeout: 60_000 },
    )
    const lines = exported.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as User)
    assert.deepEqual(
      lines.map((user) => [user.id, user.name]),
      [[ada.id, 'Ada Lovelace']],
    )
  })
})
