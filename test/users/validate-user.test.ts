import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { HttpError, type FieldError } from '../../src/errors.js'
import type { User } from '../../src/users/user.js'
import {
  validateCreate, validateEmptyBody, validatePatch, validateReplace,
} from '../../src/users/validate-user.js'
import { makeEmail } from '../helpers/users-suite.js'

const EMOJI = '😀'

const CURRENT: User = Object.freeze({
  id: '0193a5f2-7c1e-7d3a-9b2f-1c2d3e4f5a6b',
  email: 'Ada@Example.com',
  name: 'Ada Lovelace',
  status: 'active',
  metadata: Object.freeze({ team: 'analytics', level: '3' }),
  createdAt: '2026-11-21T13:47:00.000Z',
  updatedAt: '2026-11-21T14:00:00.000Z',
  version: 4,
})

type Expected = ReadonlyArray<[pointer: string, code: string]>

/** The field errors `action` throws (as [pointer, code], sorted); fails if it does not throw one. */
function fieldErrorsOf(action: () => unknown): Array<[string, string]> {
  let caught: unknown
  try {
    action()
  } catch (error) {
    caught = error
  }
  assert.ok(caught instanceof HttpError, `expected an HttpError, got ${String(caught)}`)
  assert.equal(caught.code, 'validation_failed')
  assert.equal(caught.status, 422)
  const errors: readonly FieldError[] = caught.errors ?? []
  for (const error of errors) assert.ok(error.message.length > 0, `a message for ${error.pointer}`)
  return errors.map((error): [string, string] => [error.pointer, error.code]).sort()
}

function assertRefused(action: () => unknown, expected: Expected): void {
  assert.deepEqual(fieldErrorsOf(action), [...expected].sort())
}

const valid = { email: 'ada@example.com', name: 'Ada Lovelace' }

function metadataOf(count: number): Record<string, string> {
  return Object.fromEntries(Array.from({ length: count }, (_, i) => [`k${i}`, `v${i}`]))
}

describe('validateCreate', () => {
  it('trims email and name, keeps the email\'s case, and defaults metadata to {}', () => {
    const input = validateCreate({ email: '  Ada.Lovelace@Example.COM \n', name: '\t Ada Lovelace  ' })
    assert.equal(input.email, 'Ada.Lovelace@Example.COM')
    assert.equal(input.name, 'Ada Lovelace')
    assert.deepEqual({ ...input.metadata }, {})
  })

  it('accepts every boundary value', () => {
    const metadata: Record<string, string> = metadataOf(30)
    metadata['k'.repeat(64)] = EMOJI.repeat(512)
    metadata['empty'] = ''
    const cases: Array<Record<string, unknown>> = [
      { email: makeEmail(64, 100), name: 'x' },
      { email: makeEmail(10, 254), name: 'x' },
      { email: makeEmail(64, 254), name: 'x' },
      { email: 'a@b.co', name: EMOJI.repeat(200) },
      { email: 'a@b.co', name: `Ada\u007fLovelace` },
      { email: 'a@b.co', name: `  ${'n'.repeat(200)}  ` },
      { email: 'a@b.co', name: 'x', metadata },
      { email: 'a@b.co', name: 'x', metadata: { 'A-z_0.9': 'v' } },
    ]
    for (const body of cases) assert.doesNotThrow(() => validateCreate(body), JSON.stringify(body).slice(0, 80))
  })

  it('refuses each email rule at /email', () => {
    const cases: Array<[unknown, string]> = [
      [undefined, 'required'],
      ['', 'required'],
      ['   ', 'required'],
      [null, 'required'],
      [42, 'invalid_type'],
      [['ada@example.com'], 'invalid_type'],
      ['ada.example.com', 'invalid_format'],
      ['ada lovelace@example.com', 'invalid_format'],
      ['ada@exa mple.com', 'invalid_format'],
      ['ada\t@example.com', 'invalid_format'],
      ['@example.com', 'invalid_format'],
      ['ada@', 'invalid_format'],
      ['ada@example', 'invalid_format'],
      ['ada@.com', 'invalid_format'],
      ['ada@example.', 'invalid_format'],
      ['ada@b@example.com', 'invalid_format'],
      ['ada@@example.com', 'invalid_format'],
      ['ada\u0000@example.com', 'invalid_format'],
      [makeEmail(65, 100), 'too_long'],
      [makeEmail(10, 255), 'too_long'],
    ]
    for (const [email, code] of cases) {
      const body = email === undefined ? { name: 'Ada' } : { email, name: 'Ada' }
      assertRefused(() => validateCreate(body), [['/email', code]])
    }
  })

  it('refuses each name rule at /name', () => {
    const cases: Array<[unknown, string]> = [
      [undefined, 'required'],
      ['', 'required'],
      ['  \t\n ', 'required'],
      [null, 'required'],
      [42, 'invalid_type'],
      [{ first: 'Ada' }, 'invalid_type'],
      [EMOJI.repeat(201), 'too_long'],
      ['n'.repeat(201), 'too_long'],
      ['Ada\u0000', 'invalid_characters'],
      ['Ada\u0007Lovelace', 'invalid_characters'],
      ['Ada\u001bLovelace', 'invalid_characters'],
      ['Ada\nLovelace', 'invalid_characters'],
      ['Ada\tLovelace', 'invalid_characters'],
      ['Ada\u001fLovelace', 'invalid_characters'],
      ['Ada\u0080Lovelace', 'invalid_characters'],
      ['Ada\u0085Lovelace', 'invalid_characters'],
      ['Ada\u009bLovelace', 'invalid_characters'],
      ['Ada\u009fLovelace', 'invalid_characters'],
    ]
    for (const [name, code] of cases) {
      const body = name === undefined ? { email: 'ada@example.com' } : { email: 'ada@example.com', name }
      assertRefused(() => validateCreate(body), [['/name', code]])
    }
  })

  it('refuses each metadata rule at /metadata or at the key', () => {
    const cases: Array<[unknown, Expected]> = [
      [null, [['/metadata', 'invalid_type']]],
      [[], [['/metadata', 'invalid_type']]],
      [['a'], [['/metadata', 'invalid_type']]],
      ['team=x', [['/metadata', 'invalid_type']]],
      [7, [['/metadata', 'invalid_type']]],
      [metadataOf(33), [['/metadata', 'too_many_keys']]],
      [{ '': 'x' }, [['/metadata/', 'invalid_key']]],
      [{ ['k'.repeat(65)]: 'x' }, [[`/metadata/${'k'.repeat(65)}`, 'invalid_key']]],
      [{ 'a b': 'x' }, [['/metadata/a b', 'invalid_key']]],
      [{ 'a/b': 'x' }, [['/metadata/a~1b', 'invalid_key']]],
      [{ 'a~b': 'x' }, [['/metadata/a~0b', 'invalid_key']]],
      [{ clé: 'x' }, [['/metadata/clé', 'invalid_key']]],
      [{ 'a\n': 'x' }, [['/metadata/a\n', 'invalid_key']]],
      [{ n: 1 }, [['/metadata/n', 'invalid_type']]],
      [{ b: true }, [['/metadata/b', 'invalid_type']]],
      [{ o: { x: 'y' } }, [['/metadata/o', 'invalid_type']]],
      [{ a: ['x'] }, [['/metadata/a', 'invalid_type']]],
      [{ z: null }, [['/metadata/z', 'invalid_type']]],
      [{ s: 's'.repeat(513) }, [['/metadata/s', 'too_long']]],
      [{ e: EMOJI.repeat(513) }, [['/metadata/e', 'too_long']]],
      [{ one: 1, two: 2, ok: 'fine' }, [['/metadata/one', 'invalid_type'], ['/metadata/two', 'invalid_type']]],
    ]
    for (const [metadata, expected] of cases) {
      assertRefused(() => validateCreate({ ...valid, metadata }), expected)
    }
  })

  it('refuses each unknown field with its own entry', () => {
    assertRefused(() => validateCreate({ ...valid, foo: 1, bar: null, Email: 'x' }), [
      ['/foo', 'unknown_field'], ['/bar', 'unknown_field'], ['/Email', 'unknown_field'],
    ])
    assertRefused(() => validateCreate({ ...valid, 'a/b': 1 }), [['/a~1b', 'unknown_field']])
  })

  it('treats __proto__ and constructor as unknown body fields', () => {
    const body: unknown = JSON.parse('{"email":"ada@example.com","name":"Ada","__proto__":{"x":1},"constructor":"y"}')
    assertRefused(() => validateCreate(body), [['/__proto__', 'unknown_field'], ['/constructor', 'unknown_field']])
    assert.equal(Object.getOwnPropertyNames(Object.prototype).includes('x'), false)
  })

  it('stores __proto__ and constructor metadata keys as ordinary keys', () => {
    const metadataText = '{"__proto__":"p","constructor":"c","toString":"t"}'
    const body: unknown = JSON.parse(`{"email":"ada@example.com","name":"Ada","metadata":${metadataText}}`)
    const { metadata } = validateCreate(body)
    assert.equal(Object.getPrototypeOf(metadata), null)
    assert.deepEqual(Object.keys(metadata).sort(), ['__proto__', 'constructor', 'toString'])
    assert.equal(metadata['__proto__'], 'p')
    assert.equal(metadata['constructor'], 'c')
    assert.equal(JSON.stringify(metadata), metadataText)
    assert.equal(({} as Record<string, unknown>)['p'], undefined)
  })

  it('refuses an object __proto__ metadata value without polluting Object.prototype', () => {
    const body: unknown = JSON.parse('{"email":"ada@example.com","name":"Ada","metadata":{"__proto__":{"polluted":"yes"}}}')
    assertRefused(() => validateCreate(body), [['/metadata/__proto__', 'invalid_type']])
    assert.equal(({} as Record<string, unknown>)['polluted'], undefined)
  })

  it('refuses bodies that are not objects with one entry at the root', () => {
    for (const body of [[], [valid], 'ada', 42, true, false, null, undefined]) {
      assertRefused(() => validateCreate(body), [['', 'invalid_type']])
    }
  })

  it('refuses every output-only field as read_only, whatever its value', () => {
    for (const [field, value] of Object.entries({
      id: CURRENT.id, status: 'pending', createdAt: CURRENT.createdAt, updatedAt: CURRENT.updatedAt, version: 1,
    })) {
      assertRefused(() => validateCreate({ ...valid, [field]: value }), [[`/${field}`, 'read_only']])
    }
  })

  it('gives one entry per offending field', () => {
    assertRefused(() => validateCreate({ email: 'nope', name: '', metadata: [], id: 'x', extra: 1 }), [
      ['/email', 'invalid_format'], ['/name', 'required'], ['/metadata', 'invalid_type'],
      ['/id', 'read_only'], ['/extra', 'unknown_field'],
    ])
  })
})

describe('validateReplace', () => {
  it('replaces every writable field, and a missing metadata becomes {}', () => {
    const input = validateReplace({ email: ' bob@example.com ', name: 'Bob' }, CURRENT)
    assert.equal(input.email, 'bob@example.com')
    assert.equal(input.name, 'Bob')
    assert.deepEqual({ ...input.metadata }, {})
  })

  it('accepts output-only fields equal to the stored ones (a GET-modify-PUT round trip)', () => {
    const input = validateReplace({ ...CURRENT, name: 'Countess' }, CURRENT)
    assert.equal(input.name, 'Countess')
    assert.deepEqual({ ...input.metadata }, { ...CURRENT.metadata })
  })

  it('refuses output-only fields that differ, pointing status to :activate and :suspend', () => {
    const changed: Record<string, unknown> = {
      id: '0193a5f2-7c1e-7d3a-9b2f-1c2d3e4f5a6c', status: 'suspended', createdAt: '2026-11-21T13:47:00.001Z',
      updatedAt: '2026-11-21T14:00:00Z', version: 5,
    }
    for (const [field, value] of Object.entries(changed)) {
      assertRefused(() => validateReplace({ ...CURRENT, [field]: value }, CURRENT), [[`/${field}`, 'read_only']])
    }
    assertRefused(() => validateReplace({ ...CURRENT, version: '4' }, CURRENT), [['/version', 'read_only']])
    try {
      validateReplace({ ...CURRENT, status: 'pending' }, CURRENT)
      assert.fail('status was accepted')
    } catch (error) {
      assert.ok(error instanceof HttpError)
      const message = error.errors?.[0]?.message ?? ''
      assert.match(message, /read-only/)
      assert.match(message, /:activate/)
      assert.match(message, /:suspend/)
    }
  })

  it('refuses metadata null as a wrong type', () => {
    assertRefused(() => validateReplace({ ...valid, metadata: null }, CURRENT), [['/metadata', 'invalid_type']])
  })

  it('requires email and name', () => {
    assertRefused(() => validateReplace({ metadata: {} }, CURRENT), [['/email', 'required'], ['/name', 'required']])
  })
})

describe('validatePatch', () => {
  it('changes only the named fields', () => {
    const input = validatePatch({ name: ' Countess ' }, CURRENT)
    assert.deepEqual({ ...input, metadata: { ...input.metadata } }, {
      email: CURRENT.email, name: 'Countess', metadata: { ...CURRENT.metadata },
    })
  })

  it('returns the stored values for {}', () => {
    const input = validatePatch({}, CURRENT)
    assert.deepEqual({ ...input, metadata: { ...input.metadata } }, {
      email: CURRENT.email, name: CURRENT.name, metadata: { ...CURRENT.metadata },
    })
  })

  it('merges metadata: null removes a key, a string sets one, others stay', () => {
    const input = validatePatch({ metadata: { level: null, missing: null, city: 'London' } }, CURRENT)
    assert.deepEqual({ ...input.metadata }, { team: 'analytics', city: 'London' })
    assert.deepEqual({ ...CURRENT.metadata }, { team: 'analytics', level: '3' }, 'the stored metadata is not touched')
  })

  it('removes all metadata for metadata null', () => {
    assert.deepEqual({ ...validatePatch({ metadata: null }, CURRENT).metadata }, {})
  })

  it('removes a __proto__ key with null like any other key', () => {
    const current: User = { ...CURRENT, metadata: JSON.parse('{"__proto__":"p","a":"b"}') as Record<string, string> }
    const input = validatePatch(JSON.parse('{"metadata":{"__proto__":null}}'), current)
    assert.deepEqual(Object.keys(input.metadata), ['a'])
    const added = validatePatch(JSON.parse('{"metadata":{"constructor":"c"}}'), CURRENT)
    assert.equal(Object.hasOwn(added.metadata, 'constructor'), true)
    assert.equal(added.metadata['constructor'], 'c')
  })

  it('refuses merged metadata over 32 keys, but not a patch that stays at 32', () => {
    const current: User = { ...CURRENT, metadata: metadataOf(31) }
    assertRefused(() => validatePatch({ metadata: { x: '1', y: '2' } }, current), [['/metadata', 'too_many_keys']])
    assert.equal(Object.keys(validatePatch({ metadata: { k0: null, x: '1', y: '2' } }, current).metadata).length, 32)
  })

  it('refuses null for name and email as required', () => {
    assertRefused(() => validatePatch({ name: null, email: null }, CURRENT), [['/name', 'required'], ['/email', 'required']])
  })

  it('refuses bad values, unknown fields and changed output-only fields', () => {
    assertRefused(() => validatePatch({ email: 'nope', metadata: { 'bad key': 'x', n: 1 }, foo: 1, status: 'suspended' }, CURRENT), [
      ['/email', 'invalid_format'], ['/metadata/bad key', 'invalid_key'], ['/metadata/n', 'invalid_type'],
      ['/foo', 'unknown_field'], ['/status', 'read_only'],
    ])
    assertRefused(() => validatePatch({ metadata: 'x' }, CURRENT), [['/metadata', 'invalid_type']])
    assertRefused(() => validatePatch({ metadata: [] }, CURRENT), [['/metadata', 'invalid_type']])
  })

  it('accepts output-only fields equal to the stored ones', () => {
    assert.equal(validatePatch({ ...CURRENT, name: 'Countess' }, CURRENT).name, 'Countess')
  })

  it('refuses bodies that are not objects', () => {
    for (const body of [null, [], 'x', 1, true]) assertRefused(() => validatePatch(body, CURRENT), [['', 'invalid_type']])
  })
})

describe('validateEmptyBody', () => {
  it('accepts no body and {}', () => {
    assert.doesNotThrow(() => { validateEmptyBody(undefined) })
    assert.doesNotThrow(() => { validateEmptyBody({}) })
  })

  it('refuses any field, each at its pointer', () => {
    assertRefused(() => { validateEmptyBody({ reason: 'x', status: 'active' }) }, [
      ['/reason', 'unknown_field'], ['/status', 'unknown_field'],
    ])
  })

  it('refuses JSON that is not an object', () => {
    for (const body of [null, [], 'x', 0, false]) assertRefused(() => { validateEmptyBody(body) }, [['', 'invalid_type']])
  })
})
