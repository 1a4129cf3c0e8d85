/**
 * The container's build context (.dockerignore lets in only what the build reads) holds every
 * script the image's build runs and every script those import: a script left out fails the image
 * build only where a container engine runs, long after the change.
 */
import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import path from 'node:path'
import { describe, it } from 'node:test'

import { PROJECT_ROOT } from '../helpers/child.js'

/** The scripts a script imports by relative path, and theirs. */
async function scriptsOf(name: string, seen = new Set<string>()): Promise<Set<string>> {
  if (seen.has(name)) return seen
  seen.add(name)
  const text = await readFile(path.join(PROJECT_ROOT, 'scripts', name), 'utf8')
  for (const [, imported] of text.matchAll(/from '\.\/([\w.-]+\.mjs)'/g)) {
    if (imported !== undefined) await scriptsOf(imported, seen)
  }
  return seen
}

describe('the container build context', () => {
  it('lets in every script the Dockerfile runs and every script they import', async () => {
    const dockerfile = await readFile(path.join(PROJECT_ROOT, 'Dockerfile'), 'utf8')
    const allowed = (await readFile(path.join(PROJECT_ROOT, '.dockerignore'), 'utf8'))
      .split('\n')
      .filter((line) => line.startsWith('!scripts/'))
      .map((line) => line.slice('!scripts/'.length))
    // `npm run build:bundle` runs scripts/build-bundle.mjs (package.json).
    assert.match(dockerfile, /RUN npm run build:bundle/)
    assert.match(dockerfile, /RUN node scripts\/build-sea\.mjs/)
    const run = ['build-bundle.mjs', 'build-sea.mjs']
    const needed = new Set<string>()
    for (const script of run) for (const name of await scriptsOf(script)) needed.add(name)
    assert.ok(needed.has('eager-imports.mjs'), 'the bundle build imports eager-imports.mjs')
    assert.deepEqual([...needed].filter((name) => !allowed.includes(name)).sort(), [])
  })
})
