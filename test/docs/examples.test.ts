import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { promisify } from 'node:util'

import { readRepoFile } from '../helpers/markdown.js'
import { PROJECT_ROOT } from '../helpers/project-root.js'

const run = promisify(execFile)

/** The paths of `paths` that git would not ignore; undefined where git or a checkout is missing. */
async function notIgnored(paths: readonly string[]): Promise<string[] | undefined> {
  if (!existsSync(path.join(PROJECT_ROOT, '.git'))) return undefined
  const result = await run(
    'git',
    ['check-ignore', '--no-index', '--verbose', '--non-matching', ...paths],
    {
      cwd: PROJECT_ROOT,
    },
  ).catch((error: { stdout?: string; code?: number | string }) => {
    // Exit 1: none of them is ignored; the output still lists each path.
    if (error.code === 1 && typeof error.stdout === 'string') return { stdout: error.stdout }
    if (error.code === 'ENOENT') return undefined
    throw error
  })
  if (result === undefined) return undefined
  return result.stdout
    .split('\n')
    .filter((line) => line.startsWith('::'))
    .map((line) => line.slice(line.indexOf('\t') + 1))
}

describe('examples/consumer', () => {
  const manifest = JSON.parse(readRepoFile('examples/consumer/package.json')) as {
    devDependencies: Record<string, string>
  }

  it('installs the tarball from its own folder', () => {
    assert.match(manifest.devDependencies['user-service'] ?? '', /^file:user-service-[\d.]+\.tgz$/)
    assert.match(
      readRepoFile('examples/consumer/README.md'),
      /npm pack --pack-destination examples\/consumer/,
    )
  })

  it('leaves nothing git would track when run as its README says, nor a tarball packed in the root', async (t) => {
    const tarball = (manifest.devDependencies['user-service'] ?? '').replace(/^file:/, '')
    const tracked = await notIgnored(['examples/consumer/package.json'])
    if (tracked === undefined) {
      t.skip('not a git checkout, or no git')
      return
    }
    // Not everything is ignored: the example's own files are tracked.
    assert.deepEqual(tracked, ['examples/consumer/package.json'])
    assert.deepEqual(
      await notIgnored([
        `examples/consumer/${tarball}`,
        'examples/consumer/package-lock.json',
        'examples/consumer/node_modules/user-service/package.json',
        tarball,
      ]),
      [],
    )
  })
})
