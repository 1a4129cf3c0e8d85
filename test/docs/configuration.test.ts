import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'

import { REPO_ROOT, readRepoFile, tableRows } from '../helpers/markdown.js'

// The configuration module moves into src/process/ with issue 28; whichever exists is the source.
const CONFIG_SOURCES = ['src/process/config.ts', 'src/config.ts']

function configSource(): string {
  const found = CONFIG_SOURCES.find((file) => existsSync(path.join(REPO_ROOT, file)))
  assert.ok(found !== undefined, `one of ${CONFIG_SOURCES.join(', ')} exists`)
  return found
}

/**
 * The variable names a source reads, from its text: a quoted ALL_CAPS name that opens a call or an
 * index (`read('PORT')`, `env['PORT']`, `env.get('PORT')`), or `env.PORT`.
 */
function variablesRead(source: string): Set<string> {
  const names = new Set<string>()
  for (const match of source.matchAll(/[([]\s*['"]([A-Z][A-Z0-9_]*)['"]\s*[)\],]/g))
    names.add(match[1] ?? '')
  for (const match of source.matchAll(/\benv\??\.([A-Z][A-Z0-9_]*)\b/g)) names.add(match[1] ?? '')
  names.delete('')
  return names
}

/** The variables a table names in its first column, headed `variable`. */
function variablesListed(document: string): Map<string, string[]> {
  const rows = new Map<string, string[]>()
  for (const row of tableRows(readRepoFile(document), 'variable')) {
    for (const match of (row[0] ?? '').matchAll(/`([A-Z][A-Z0-9_]*)`/g))
      rows.set(match[1] ?? '', row)
  }
  return rows
}

const sorted = (names: Iterable<string>): string[] => [...names].sort()

describe('docs/configuration.md and the configuration source', () => {
  it('reads variable names in each way a configuration module reads them', () => {
    const source = `read('PORT'); env['HOST']; env.DATA_DIR; env?.WORKERS; parse(read("LOG_LEVEL"), 'LOG_LEVEL', 1)
      throw new ConfigError('JWT_SECRET must be set'); const t = \`NOT_READ is \${x}\``
    assert.deepEqual(sorted(variablesRead(source)), [
      'DATA_DIR',
      'HOST',
      'LOG_LEVEL',
      'PORT',
      'WORKERS',
    ])
  })

  it("finds the service's variables in the configuration source", () => {
    const read = variablesRead(readRepoFile(configSource()))
    for (const name of ['PORT', 'HOST', 'DATA_DIR', 'JWT_SECRET', 'DATABASE_URL', 'NODE_ENV']) {
      assert.ok(read.has(name), `${configSource()} reads ${name}`)
    }
  })

  it('documents every variable the configuration reads, and no other', () => {
    const read = sorted(variablesRead(readRepoFile(configSource())))
    const documented = sorted(variablesListed('docs/configuration.md').keys())
    assert.deepEqual(
      {
        undocumented: read.filter((name) => !documented.includes(name)),
        notRead: documented.filter((name) => !read.includes(name)),
      },
      { undocumented: [], notRead: [] },
    )
  })

  it('gives each variable a default and a meaning', () => {
    for (const [name, row] of variablesListed('docs/configuration.md')) {
      assert.equal(row.length, 3, `${name}: variable | default | meaning`)
      assert.notEqual(row[1], '', `${name} has a default (or says none)`)
      assert.ok((row[2] ?? '').length > 10, `${name} says what it means`)
    }
  })

  it("names in the README's short table only variables the configuration reads", () => {
    const read = variablesRead(readRepoFile(configSource()))
    const listed = sorted(variablesListed('README.md').keys())
    assert.ok(listed.length >= 5)
    assert.deepEqual(
      listed.filter((name) => !read.has(name)),
      [],
    )
  })
})
