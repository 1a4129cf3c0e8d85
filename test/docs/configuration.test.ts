import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { parseConfig } from '../../src/process/config.js'
import { SETTINGS } from '../../src/settings.js'
import { readRepoFile, tableRows } from '../helpers/markdown.js'

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

/** Every variable the settings are read from (src/settings.ts), with its setting's name. */
const variables = new Map(
  Object.entries(SETTINGS).flatMap(([name, spec]) =>
    spec.env.map((variable) => [variable, { name, spec }] as const),
  ),
)

/**
 * How the documentation writes a default: numbers as digits, switches as on/off. NODE_ENV is not
 * a switch: it is `production` or anything else, and unset by default.
 */
function shownDefault(variable: string, value: unknown): string | undefined {
  if (typeof value === 'number') return `\`${value}\``
  if (typeof value === 'boolean' && variable !== 'NODE_ENV') return value ? '`on`' : '`off`'
  if (typeof value === 'string' && value !== '') return value
  return undefined
}

describe('docs/configuration.md and the settings (src/settings.ts)', () => {
  it("reads the service's variables from the settings", () => {
    for (const name of ['PORT', 'HOST', 'DATA_DIR', 'JWT_SECRET', 'DATABASE_URL', 'NODE_ENV']) {
      assert.ok(variables.has(name), `src/settings.ts reads ${name}`)
    }
  })

  it('documents every variable of the settings, and no other', () => {
    const read = sorted(variables.keys())
    const documented = sorted(variablesListed('docs/configuration.md').keys())
    assert.deepEqual(
      {
        undocumented: read.filter((name) => !documented.includes(name)),
        notRead: documented.filter((name) => !read.includes(name)),
      },
      { undocumented: [], notRead: [] },
    )
  })

  it("shows each variable's default as the settings declare it", () => {
    for (const [variable, row] of variablesListed('docs/configuration.md')) {
      const setting = variables.get(variable)
      assert.ok(setting !== undefined, variable)
      const value: unknown = setting.spec.default
      if (Array.isArray(value) && value.length > 0) {
        // A list is shown as the text that parses to it (WEBHOOK_RETRY_SCHEDULE's delays).
        const text = /`([^`]+)`/.exec(row[1] ?? '')?.[1] ?? ''
        assert.deepEqual(setting.spec.parse(text, variable), value, `${variable}: default ${text}`)
        continue
      }
      const shown = shownDefault(variable, value)
      if (shown !== undefined)
        assert.ok((row[1] ?? '').includes(shown), `${variable}: default ${shown}, got ${row[1]}`)
      else assert.match(row[1] ?? '', /none|empty/, `${variable} says it has no default`)
    }
  })

  it('gives the parsed default when a variable is unset, as documented', () => {
    const config = parseConfig({}, '/srv')
    for (const [name, spec] of Object.entries(SETTINGS)) {
      if (name === 'dataDir') assert.equal(config.dataDir, `/srv/${spec.default}`)
      else assert.deepEqual(config[name as keyof typeof config], spec.default, name)
    }
  })

  it('gives each variable a default and a meaning, and each setting a line of doc', () => {
    for (const [name, row] of variablesListed('docs/configuration.md')) {
      assert.equal(row.length, 3, `${name}: variable | default | meaning`)
      assert.notEqual(row[1], '', `${name} has a default (or says none)`)
      assert.ok((row[2] ?? '').length > 10, `${name} says what it means`)
    }
    for (const [name, spec] of Object.entries(SETTINGS))
      assert.ok(spec.doc.length > 10 && !spec.doc.includes('\n'), `${name} has one line of doc`)
  })

  it("names in the README's short table only variables the settings read", () => {
    const listed = sorted(variablesListed('README.md').keys())
    assert.ok(listed.length >= 5)
    assert.deepEqual(
      listed.filter((name) => !variables.has(name)),
      [],
    )
  })
})
