import assert from 'node:assert/strict'
import { readdirSync, statSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'

import { blockAfter, readRepoFile } from '../helpers/markdown.js'
import { PROJECT_ROOT } from '../helpers/project-root.js'

interface Entry {
  /** From the repository's root; a folder ends with `/`. */
  readonly path: string
  readonly line: string
}

/** The README's Layout block as paths: two spaces of indent per level, the name first. */
function parseLayout(block: string): Entry[] {
  const entries: Entry[] = []
  const parents: string[] = []
  for (const line of block.split('\n')) {
    if (line.trim() === '') continue
    const match = /^( *)(\S+)/.exec(line)
    const indent = match?.[1]?.length ?? 0
    const name = match?.[2] ?? ''
    assert.equal(indent % 2, 0, `an even indent: "${line}"`)
    const depth = indent / 2
    assert.ok(depth <= parents.length, `a parent above: "${line}"`)
    parents.length = depth
    const entry = `${parents.join('')}${name}`
    entries.push({ path: entry, line })
    if (name.endsWith('/')) parents.push(name)
  }
  return entries
}

/** Every folder under `folder` (from the root), at any depth, each ending with `/`. */
function foldersUnder(folder: string): string[] {
  return readdirSync(path.join(PROJECT_ROOT, folder), { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .flatMap((entry) => {
      const child = `${folder}${entry.name}/`
      return [child, ...foldersUnder(child)]
    })
}

const layout = (): Entry[] => parseLayout(blockAfter(readRepoFile('README.md'), '## Layout'))

function kindOf(relative: string): 'folder' | 'file' | 'missing' {
  try {
    return statSync(path.join(PROJECT_ROOT, relative)).isDirectory() ? 'folder' : 'file'
  } catch {
    return 'missing'
  }
}

describe("the README's Layout block", () => {
  it('reads nested entries as paths', () => {
    assert.deepEqual(
      parseLayout('src/\n  a.ts   x\n  b/     y\n    c/   z\n  d/\ntest/').map(
        (entry) => entry.path,
      ),
      ['src/', 'src/a.ts', 'src/b/', 'src/b/c/', 'src/d/', 'test/'],
    )
  })

  it('has one line per entry, within 100 columns', () => {
    const long = layout()
      .filter((entry) => entry.line.length > 100)
      .map((entry) => entry.path)
    assert.deepEqual(long, [])
  })

  it('names only folders and files that exist', () => {
    const wrong = layout().flatMap((entry) => {
      const want = entry.path.endsWith('/') ? 'folder' : 'file'
      const kind = kindOf(entry.path)
      return kind === want ? [] : [`${entry.path}: ${kind}`]
    })
    assert.deepEqual(wrong, [])
  })

  it('names every folder under src/', () => {
    const named = new Set(layout().map((entry) => entry.path))
    assert.ok(named.has('src/'))
    assert.deepEqual(
      foldersUnder('src/').filter((folder) => !named.has(folder)),
      [],
    )
  })
})
