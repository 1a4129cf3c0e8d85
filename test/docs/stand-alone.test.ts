import assert from 'node:assert/strict'
import { readdirSync, statSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'

import { request } from '../helpers/http.js'
import { readRepoFile } from '../helpers/markdown.js'
import { PROJECT_ROOT } from '../helpers/project-root.js'
import { startService } from '../helpers/service.js'

/**
 * What a reader of the repository reads, the sources' comments included: files, and folders read
 * whole (every file under them whose name ends with one of EXTENSIONS). Add a path here to hold it
 * to the same rules.
 */
const READ_PATHS = ['README.md', 'docs/', 'src/']
const EXTENSIONS = ['.md', '.ts']

/** Every file a path of READ_PATHS names, from the repository's root, sorted. */
function filesOf(relative: string): string[] {
  if (!statSync(path.join(PROJECT_ROOT, relative)).isDirectory()) return [relative]
  return readdirSync(path.join(PROJECT_ROOT, relative), { recursive: true, encoding: 'utf8' })
    .map((name) => `${relative.replace(/\/$/, '')}/${name.split(path.sep).join('/')}`)
    .filter((name) => EXTENSIONS.some((extension) => name.endsWith(extension)))
    .sort()
}

interface Text {
  readonly name: string
  readonly text: string
}

/**
 * A "§" is allowed only where it names a section of an RFC (`RFC 9110 §13.1.1`, `RFC 3986, §2.2`):
 * the repository holds no other document whose sections it could name.
 */
function strayParagraphSigns({ name, text }: Text): string[] {
  const found: string[] = []
  text.split('\n').forEach((line, index) => {
    for (const match of line.matchAll(/§/g)) {
      const before = line.slice(0, match.index)
      if (!/\bRFC ?\d{3,5},? ?$/.test(before))
        found.push(`${name}:${index + 1}: ${line.trim().slice(0, 120)}`)
    }
  })
  return found
}

/**
 * Words that send a reader to something the repository does not hold (the specification it was
 * written against, a folder beside the clone), or that tell how and where it was built rather than
 * what it does. "The Store contract" (the interface in src/store/store.ts) is the project's own.
 */
const OUTSIDE_WORDS = [
  /CONTRACT/,
  /\.\.\/shared\b/,
  /(?<!store |Store )\bthe contract\b/i,
  /\bthis machine\b/i,
  /\bthese machines\b/i,
  /\bissue \d+/i,
  /\bitem \d+\b/i,
]

function outsideWords({ name, text }: Text): string[] {
  const found: string[] = []
  text.split('\n').forEach((line, index) => {
    const word = OUTSIDE_WORDS.find((pattern) => pattern.test(line))
    if (word !== undefined) found.push(`${name}:${index + 1} (${word.source}): ${line.trim()}`)
  })
  return found
}

const documents = (): Text[] =>
  READ_PATHS.flatMap(filesOf).map((name) => ({ name, text: readRepoFile(name) }))

describe('the repository explains itself', () => {
  it('finds a stray "§" and lets an RFC\'s section through', () => {
    const sample = {
      name: 'sample.md',
      text: 'RFC 9110 §13 and RFC 3986, §2.2 and RFC9112 §9.6\nsee §10 of it\n(§7)',
    }
    assert.deepEqual(strayParagraphSigns(sample), [
      'sample.md:2: see §10 of it',
      'sample.md:3: (§7)',
    ])
  })

  it('finds words that point outside or tell where the project was built', () => {
    const sample = {
      name: 'sample.md',
      text: [
        'the Store contract and the store contract suite',
        'see ../shared/CONTRACT.md',
        'where the contract is silent',
        'measured on this machine',
        'as issue 30, item 2 asked',
      ].join('\n'),
    }
    assert.deepEqual(
      outsideWords(sample).map((line) => line.split(' (')[0]),
      ['sample.md:2', 'sample.md:3', 'sample.md:4', 'sample.md:5'],
    )
  })

  it('reads the README and every page of docs/', () => {
    const names = READ_PATHS.flatMap(filesOf)
    assert.ok(names.includes('README.md'))
    assert.ok(names.includes('docs/api.md'))
    assert.ok(names.includes('docs/events.md'))
  })

  it('has no "§" in the README or docs/ but an RFC section', () => {
    assert.deepEqual(documents().flatMap(strayParagraphSigns), [])
  })

  it('names nothing outside the repository in the README or docs/', () => {
    assert.deepEqual(documents().flatMap(outsideWords), [])
  })

  it('keeps no absolute path of the machine that ran the mutation tests in mutation/', () => {
    for (const name of readdirSync(path.join(PROJECT_ROOT, 'mutation')).filter((file) =>
      file.endsWith('.json'),
    )) {
      const text = readRepoFile(`mutation/${name}`)
      const results = JSON.parse(text) as { projectRoot?: unknown }
      assert.equal(results.projectRoot, '.', name)
      // Stryker's test output names its sandbox and node_modules by absolute path.
      assert.doesNotMatch(text, /(?:\/[\w.-]+)+\/(?:\.stryker-tmp|node_modules)\//, name)
      assert.equal(text.includes(PROJECT_ROOT), false, name)
    }
  })

  it('serves an OpenAPI document with no "§" but an RFC section, naming nothing outside', async (t) => {
    const s = await startService(t)
    const res = await request('GET', `${s.baseUrl}/openapi.json`)
    assert.equal(res.status, 200)
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/)
    // One line per member, so that a finding names where it is.
    const served = { name: 'GET /openapi.json', text: JSON.stringify(res.body, null, 1) }
    assert.deepEqual(strayParagraphSigns(served), [])
    assert.deepEqual(outsideWords(served), [])
  })
})
