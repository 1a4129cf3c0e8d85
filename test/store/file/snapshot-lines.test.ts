import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { MAX_USER_VERSION, toRecord, type User } from '../../../src/domain/user.js'
import { UserLines } from '../../../src/store/file/snapshot-lines.js'
import { parseStoredUser } from '../../../src/store/file/stored-files.js'
import { makeUser } from '../../helpers/store-users.js'

/** Users of every kind a snapshot holds: escapes, non-ASCII, metadata, revoked, the last version. */
function users(): User[] {
  const metadata = JSON.parse(
    '{"plan":"pro","2":"numeric key","__proto__":"own key","esc\\"aped":"tab\\tand \\u0001"}',
  ) as Record<string, string>
  return [
    makeUser(),
    makeUser({
      status: 'active',
      name: 'Zoë ✓ "quoted" \\ back\u2028',
      email: 'Mixed.Case@Ex.com',
    }),
    makeUser({ status: 'suspended', metadata, version: MAX_USER_VERSION }),
    makeUser({
      tokensValidAfter: '2026-01-02T03:04:05.000Z',
      updatedAt: '2026-01-02T03:04:06.789Z',
    }),
    makeUser({ name: 'emoji 😀 and a lone \ud800 surrogate', metadata: { '': '' } }),
  ]
}

/** What the line walk makes of one line, or undefined when it refuses it. */
function walk(line: string): User | undefined {
  const lines = new UserLines(`${line}\n`)
  const record = lines.next()
  if (record === undefined) {
    assert.equal(lines.at, 0, 'a refused line moved the walk')
    return undefined
  }
  assert.equal(record.json, line, 'the record does not keep the line as its JSON')
  assert.equal(lines.at, line.length + 1)
  return record.user
}

/**
 * The load's safety: whatever the walk accepts, a user file's check accepts as the same user, and
 * the line is the JSON the store writes for that user (the line is served as it is): the same
 * fields in the same order, each the same value, only a string's characters maybe escaped.
 */
function assertNoLooserThanAFile(line: string): User | undefined {
  const user = walk(line)
  if (user !== undefined) {
    const id = line.slice('{"id":"'.length, '{"id":"'.length + 36)
    const checked = parseStoredUser(line, id)
    assert.ok(checked !== undefined, `accepted a line a user file's check refuses: ${line}`)
    assert.deepEqual(user, checked)
    const written = toRecord(user).json
    assert.deepEqual(
      Object.entries(JSON.parse(line) as object),
      Object.entries(JSON.parse(written) as object),
      `accepted a line the store does not write: ${line}`,
    )
    assert.equal(
      line.replace(/"(?:[^"\\]|\\.)*"/g, '""'),
      written.replace(/"(?:[^"\\]|\\.)*"/g, '""'),
      `accepted a line laid out otherwise than the store writes it: ${line}`,
    )
  }
  return user
}

describe('the user lines of a snapshot', () => {
  it('reads every line the store writes as the user a user file gives', () => {
    for (const user of users()) {
      const line = toRecord(user).json
      const read = assertNoLooserThanAFile(line)
      assert.ok(read !== undefined, `refused a line the store wrote: ${line}`)
      assert.deepEqual(read, parseStoredUser(line, user.id))
    }
  })

  it('walks line after line, and stops at the first that is not a user', () => {
    const [a, b, c] = users().map((user) => toRecord(user).json)
    const lines = new UserLines(`${a}\n${b}\n{"id":"x"}\n${c}\n`)
    assert.equal(lines.next()?.json, a)
    assert.equal(lines.next()?.json, b)
    const at = lines.at
    assert.equal(lines.next(), undefined)
    assert.equal(lines.at, at)
  })

  it('refuses what a user file may hold but the store never writes, and what a file refuses', () => {
    const plain = toRecord(makeUser({ status: 'active' })).json
    const revoked = toRecord(makeUser({ tokensValidAfter: '2026-01-02T03:04:05.000Z' })).json
    const changed: [string, string][] = [
      ['a field the store does not write', plain.replace('"version":1', '"version":1,"extra":"x"')],
      ['a space', plain.replace('"name":', '"name": ')],
      [
        'fields in another order',
        plain.replace(/"status":"active",("metadata":\{\}),/, '$1,"status":"active",'),
      ],
      ['a version as text', plain.replace('"version":1', '"version":"1"')],
      ['a version with a fraction', plain.replace('"version":1', '"version":1.0')],
      ['a version with an exponent', plain.replace('"version":1', '"version":1e0')],
      ['version 0', plain.replace('"version":1', '"version":0')],
      ['a negative version', plain.replace('"version":1', '"version":-1')],
      ['a version past 2^53', plain.replace('"version":1', '"version":9007199254740993')],
      ['an unknown status', plain.replace('"active"', '"deleted"')],
      ['an escaped status', plain.replace('"active"', '"\\u0061ctive"')],
      ['a time stamp without milliseconds', plain.replace(/("createdAt":"[^"]*)\.\d{3}Z"/, '$1Z"')],
      [
        'an upper-case id',
        plain.replace(/^\{"id":"([^"]*)"/, (_, id: string) => `{"id":"${id.toUpperCase()}"`),
      ],
      ['an email that is a number', plain.replace(/"email":"[^"]*"/, '"email":42')],
      ['an email with a raw control character', plain.replace('@', '\u0001@')],
      ['an email with a bad escape', plain.replace('@', '\\x@')],
      ['an email left open', plain.replace(/"email":"([^"]*)"/, '"email":"$1\\"')],
      ['metadata holding a number', plain.replace('"metadata":{}', '"metadata":{"a":1}')],
      ['metadata that is a list', plain.replace('"metadata":{}', '"metadata":[]')],
      ['no metadata', plain.replace('"metadata":{},', '')],
      [
        'a revocation before the version',
        revoked
          .replace(/,("tokensValidAfter":"[^"]*")\}$/, '}')
          .replace('"version":1', '$1,"version":1'),
      ],
      [
        'a revocation that is null',
        revoked.replace(/"tokensValidAfter":"[^"]*"/, '"tokensValidAfter":null'),
      ],
      ['text after the object', `${plain} `],
    ]
    for (const [what, line] of changed) {
      assert.notEqual(line, plain, `the change "${what}" changed nothing`)
      assert.equal(assertNoLooserThanAFile(line), undefined, `accepted ${what}: ${line}`)
    }
  })

  it('never accepts a damaged line that a user file would refuse or the store would not write', () => {
    // Damage of every kind at every place: a flipped bit, a byte dropped, a byte doubled (30,000
    // lines).
    let seed = 39
    const random = (below: number): number => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31
      return seed % below
    }
    let accepted = 0
    for (const user of users()) {
      const line = toRecord(user).json
      for (let n = 0; n < 6000; n += 1) {
        const at = random(line.length)
        const code = line.charCodeAt(at)
        const damaged = [
          line.slice(0, at) + String.fromCharCode(code ^ (1 << random(7))) + line.slice(at + 1),
          line.slice(0, at) + line.slice(at + 1),
          line.slice(0, at) + line.charAt(at) + line.slice(at),
        ][n % 3] as string
        if (assertNoLooserThanAFile(damaged) !== undefined) accepted += 1
      }
    }
    // Damage inside a name or an email still reads as a user: the digest is what catches it.
    assert.ok(accepted > 0)
  })
})
