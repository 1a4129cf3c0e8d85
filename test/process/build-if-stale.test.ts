import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import {
  copyFile,
  cp,
  mkdir,
  readFile,
  rm,
  stat,
  symlink,
  utimes,
  writeFile,
} from 'node:fs/promises'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'
import { promisify } from 'node:util'

import { PROJECT_ROOT } from '../helpers/child.js'
import { makeTempDir } from '../helpers/service.js'

const run = promisify(execFile)
const SCRIPT = path.join(PROJECT_ROOT, 'scripts', 'build-if-stale.mjs')

/** A small project with the repository's tsconfig files and its node_modules (for tsc). */
async function makeProject(root: string): Promise<void> {
  await mkdir(path.join(root, 'src', 'process'), { recursive: true })
  for (const file of ['tsconfig.json', 'tsconfig.build.json', 'package.json'])
    await copyFile(path.join(PROJECT_ROOT, file), path.join(root, file))
  await symlink(path.join(PROJECT_ROOT, 'node_modules'), path.join(root, 'node_modules'))
  await writeFile(path.join(root, 'src', 'bin.ts'), 'export const answer: number = 42\n')
  await writeFile(path.join(root, 'src', 'process', 'extra.ts'), 'export const extra = 1\n')
}

/** Runs the script on `root`; its time of last whole build (dist/.built) after, 0 for none. */
async function buildIfStale(root: string): Promise<{ code: number; record: number }> {
  const code = await run(process.execPath, [SCRIPT, root], { timeout: 120_000 }).then(
    () => 0,
    (error: { code?: number }) => error.code ?? -1,
  )
  const record = await stat(path.join(root, 'dist', '.built')).then(
    (stats) => stats.mtimeMs,
    () => 0,
  )
  return { code, record }
}

/**
 * A project with the build scripts and the admin page, whose command prints the value of a module
 * the bundle carries, built once.
 */
async function builtWithBundle(t: TestContext): Promise<string> {
  const root = await makeTempDir(t, 'build-if-stale-')
  await makeProject(root)
  for (const folder of ['scripts', 'admin'])
    await cp(path.join(PROJECT_ROOT, folder), path.join(root, folder), { recursive: true })
  await writeFile(
    path.join(root, 'src', 'bin.ts'),
    "import { extra } from './process/extra.js'\nprocess.stdout.write('extra ' + extra + '\\n')\n",
  )
  assert.equal((await buildIfStale(root)).code, 0)
  return root
}

/** Sets a file's time a second into the future: newer than any build made before now. */
async function touchLater(file: string): Promise<void> {
  const later = new Date(Date.now() + 1000)
  await utimes(file, later, later)
}

describe('npm start and npm run token build only when the sources changed (build-if-stale)', () => {
  it('is what npm start and npm run token run before the service and the token command', async () => {
    const manifest = JSON.parse(
      await readFile(path.join(PROJECT_ROOT, 'package.json'), 'utf8'),
    ) as {
      scripts: Record<string, string>
    }
    assert.equal(manifest.scripts['start'], 'node scripts/build-if-stale.mjs && node dist/bin.js')
    assert.equal(
      manifest.scripts['token'],
      'node scripts/build-if-stale.mjs && node dist/bin.js token',
    )
  })

  it('builds a fresh clone, skips an up-to-date build, and builds again after a change', {
    timeout: 180_000,
  }, async (t) => {
    const root = await makeTempDir(t, 'build-if-stale-')
    await makeProject(root)

    const first = await buildIfStale(root)
    assert.equal(first.code, 0)
    assert.ok(first.record > 0, 'a fresh clone is built')
    assert.ok((await stat(path.join(root, 'dist', 'bin.js'))).isFile())

    const again = await buildIfStale(root)
    assert.deepEqual(again, first, 'nothing changed: no build')

    await touchLater(path.join(root, 'src', 'process', 'extra.ts'))
    const edited = await buildIfStale(root)
    assert.equal(edited.code, 0)
    assert.ok(edited.record > first.record, 'an edited source is built')

    // A deleted source changes its folder.
    await rm(path.join(root, 'src', 'process', 'extra.ts'))
    await touchLater(path.join(root, 'src', 'process'))
    const deleted = await buildIfStale(root)
    assert.ok(deleted.record > edited.record, 'a deleted source is built')
  })

  it('writes the command as one file over dist/bin.js, as npm run build does', {
    timeout: 180_000,
  }, async (t) => {
    const root = await builtWithBundle(t)
    const bin = path.join(root, 'dist', 'bin.js')
    const text = await readFile(bin, 'utf8')
    // tsc's bin.js imports ./process/extra.js; the bundle carries it.
    assert.doesNotMatch(text, /^(?:import|export)\b[^\n]*from\s*["']\.\.?\//m)
    assert.match(text, /sourceMappingURL=bin\.js\.map/)
    assert.ok((await stat(path.join(root, 'dist', 'bin.js.map'))).isFile())
    assert.ok((await stat(path.join(root, 'dist', 'admin', 'index.html'))).isFile())
    const ran = await run(process.execPath, [bin], { timeout: 30_000 })
    assert.equal(ran.stdout, 'extra 1\n')

    // A change of a build script builds again, as a change of a source does.
    const built = (await buildIfStale(root)).record
    await touchLater(path.join(root, 'scripts', 'eager-imports.mjs'))
    const again = await buildIfStale(root)
    assert.equal(again.code, 0)
    assert.ok(again.record > built, 'an edited build script is built')
  })

  it('builds again after a build cut off once tsc was done, before the bundle', {
    timeout: 180_000,
  }, async (t) => {
    const root = await builtWithBundle(t)
    // An edit, then a build that Ctrl-C stops once tsc is done: the bundle still has the old
    // value, and tsc's own record is newer than the edit.
    const extra = path.join(root, 'src', 'process', 'extra.ts')
    await writeFile(extra, 'export const extra = 2\n')
    await touchLater(extra)
    await new Promise((resolve) => setTimeout(resolve, 1100))
    const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc')
    await run(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: root, timeout: 120_000 })
    const bin = path.join(root, 'dist', 'bin.js')
    assert.equal((await run(process.execPath, [bin])).stdout, 'extra 1\n', 'the cut-off state')
    assert.equal((await buildIfStale(root)).code, 0)
    assert.equal((await run(process.execPath, [bin])).stdout, 'extra 2\n')
  })

  it('fails on a type error, and tries again on the next run', { timeout: 180_000 }, async (t) => {
    const root = await makeTempDir(t, 'build-if-stale-')
    await makeProject(root)
    await writeFile(path.join(root, 'src', 'bin.ts'), "export const answer: number = 'no'\n")
    const broken = await buildIfStale(root)
    assert.deepEqual(broken, { code: 1, record: 0 })
    const still = await buildIfStale(root)
    assert.deepEqual(still, { code: 1, record: 0 }, 'it built again and failed again')
    await writeFile(path.join(root, 'src', 'bin.ts'), 'export const answer: number = 42\n')
    const fixed = await buildIfStale(root)
    assert.equal(fixed.code, 0)
    assert.ok(fixed.record > 0)
  })
})
