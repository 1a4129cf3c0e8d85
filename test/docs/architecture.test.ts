import assert from 'node:assert/strict'
import { readdirSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'

import { readRepoFile } from '../helpers/markdown.js'
import { PROJECT_ROOT } from '../helpers/project-root.js'

/** Every module under src/, as its path from src/ with `/` (`store/file/file-store.ts`). */
function modules(): string[] {
  return readdirSync(path.join(PROJECT_ROOT, 'src'), { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.ts'))
    .map((name) => name.split(path.sep).join('/'))
    .sort()
}

/** The modules a list item of the section "Every module" names: its first code span. */
function listed(text: string): string[] {
  const start = text.indexOf('\n## Every module')
  assert.notEqual(start, -1, 'docs/architecture.md has a section "Every module"')
  const end = text.indexOf('\n## ', start + 1)
  const section = text.slice(start, end === -1 ? undefined : end)
  return [...section.matchAll(/^- `([^`]+\.ts)`/gm)].map((match) => match[1] ?? '')
}

describe('docs/architecture.md', () => {
  const text = readRepoFile('docs/architecture.md')

  it('reads the modules of its list from the start of each item', () => {
    const sample =
      '\n## Every module\n- `a.ts`: x, not `b.ts`\n- `c/d.ts`: y\n## Next\n- `e.ts`: z\n'
    assert.deepEqual(listed(sample), ['a.ts', 'c/d.ts'])
  })

  it('names every module under src/, each once', () => {
    const named = listed(text)
    assert.deepEqual(
      modules().filter((module) => !named.includes(module)),
      [],
    )
    assert.deepEqual(
      named.filter((module, index) => named.indexOf(module) !== index),
      [],
    )
  })

  it('names no module that does not exist', () => {
    const existing = new Set(modules())
    assert.deepEqual(
      listed(text).filter((module) => !existing.has(module)),
      [],
    )
  })

  it('walks one write and one read, and says where a route, setting, store and event type go', () => {
    for (const heading of [
      '## The layers, and why',
      '## One write: `PATCH /users/{id}`',
      '## One read: `GET /users/{id}`',
      '## Where a change goes',
    ])
      assert.ok(text.includes(`\n${heading}\n`), heading)
    for (const change of ['A new route', 'A new setting', 'A new store', 'A new event type'])
      assert.ok(text.includes(`**${change}**`), change)
  })
})
