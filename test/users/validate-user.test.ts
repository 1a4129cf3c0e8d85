import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { type FieldError, ServiceError } from '../../src/domain/errors.js'
import type { User } from '../../src/domain/user.js'
import { toHttpError } from '../../src/http/problem.js'
import {
  validateCreate,
  validateEmptyBody,
  validatePatch,
  validateReplace,
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

/** The validation_failed ServiceError `action` throws; fails if it throws anything else or nothing. */
function problemOf(action: () => unknown): ServiceError {
  let caught: unknown
  try {
    action()
  } catch (error) {
    caught = error
  }
  assert.ok(caught instanceof ServiceError, `expected a ServiceError, got ${String(caught)}`)
  assert.equal(caught.code, 'validation_failed')
  assert.equal(toHttpError(caught).status, 422)
  return caught
}

/** The field errors `action` throws (as [pointer, code], sorted); fails if it does not throw one. */
function fieldErrorsOf(action: () => unknown): Array<[string, string]> {
  const errors: readonly FieldError[] = problemOf(action).errors ?? []
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
  it("trims email and name, keeps the email's case, and defaults metadata to {}", () => {
    const input = validateCreate({
      email: '  Ada.Lovelace@Example.COM \n',
      name: '\t Ada Lovelace  ',
    })
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
      // U+007E and U+00A0 stand just outside the refused DEL and C1 range.
      { email: 'a@b.co', name: 'Ada~\u00a0Lovelace' },
      { email: 'a@b.co', name: `  ${'n'.repeat(200)}  ` },
      { email: 'a@b.co', name: 'x', metadata },
      { email: 'a@b.co', name: 'x', metadata: { 'A-z_0.9': 'v' } },
    ]
    for (const body of cases) {
      // Accepted as given: the name trimmed, nothing else changed.
      const input = validateCreate(body)
      const label = JSON.stringify(body).slice(0, 80)
      assert.equal(input.email, body['email'], label)
      assert.equal(input.name, String(body['name']).trim(), label)
      assert.deepEqual({ ...input.metadata }, body['metadata'] ?? {}, label)
    }
  })

  it('counts characters in the singular and the plural in its messages', () => {
    const messages = (body: unknown): string[] => {
      try {
        validateCreate(body)
      } catch (error) {
        assert.ok(error instanceof ServiceError && error.code === 'validation_failed')
        return (error.errors ?? []).map((entry) => entry.message)
      }
      return assert.fail('expected a validation error')
    }
    assert.deepEqual(messages({ email: 'ada@example.com', name: '  ' }), [
      'name must have at least 1 character.',
    ])
    assert.deepEqual(messages({ email: 'ada@example.com', name: 'n'.repeat(201) }), [
      'name must have at most 200 characters.',
    ])
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
      ['Ada\u007fLovelace', 'invalid_characters'],
      ['\u007f', 'invalid_characters'],
      ['Ada\u0080Lovelace', 'invalid_characters'],
      ['Ada\u0085Lovelace', 'invalid_characters'],
      ['Ada\u009bLovelace', 'invalid_characters'],
      ['Ada\u009fLovelace', 'invalid_characters'],
    ]
    for (const [name, code] of cases) {
      const body =
        name === undefined ? { email: 'ada@example.com' } : { email: 'ada@example.com', name }
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
      [
        { one: 1, two: 2, ok: 'fine' },
        [
          ['/metadata/one', 'invalid_type'],
          ['/metadata/two', 'invalid_type'],
        ],
      ],
    ]
    for (const [metadata, expected] of cases) {
      assertRefused(() => validateCreate({ ...valid, metadata }), expected)
    }
  })

  it('refuses each unknown field with its own entry', () => {
    assertRefused(
      () => validateCreate({ ...valid, foo: 1, bar: null, Email: 'x' }),
      [
        ['/foo', 'unknown_field'],
        ['/bar', 'unknown_field'],
        ['/Email', 'unknown_field'],
      ],
    )
    assertRefused(() => validateCreate({ ...valid, 'a/b': 1 }), [['/a~1b', 'unknown_field']])
  })

  it('treats __proto__ and constructor as unknown body fields', () => {
    const body: unknown = JSON.parse(
      '{"email":"ada@example.com","name":"Ada","__proto__":{"x":1},"constructor":"y"}',
    )
    assertRefused(
      () => validateCreate(body),
      [
        ['/__proto__', 'unknown_field'],
        ['/constructor', 'unknown_field'],
      ],
    )
    assert.equal(Object.getOwnPropertyNames(Object.prototype).includes('x'), false)
  })

  it('stores __proto__ and constructor metadata keys as ordinary keys', () => {
    const metadataText = '{"__proto__":"p","constructor":"c","toString":"t"}'
    const body: unknown = JSON.parse(
      `{"email":"ada@example.com","name":"Ada","metadata":${metadataText}}`,
    )
    const { metadata } = validateCreate(body)
    assert.equal(Object.getPrototypeOf(metadata), null)
    assert.deepEqual(Object.keys(metadata).sort(), ['__proto__', 'constructor', 'toString'])
    assert.equal(metadata['__proto__'], 'p')
    assert.equal(metadata['constructor'], 'c')
    assert.equal(JSON.stringify(metadata), metadataText)
    assert.equal(({} as Record<string, unknown>)['p'], undefined)
  })

  it('refuses an object __proto__ metadata value without polluting Object.prototype', () => {
    const body: unknown = JSON.parse(
      '{"email":"ada@example.com","name":"Ada","metadata":{"__proto__":{"polluted":"yes"}}}',
    )
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
      id: CURRENT.id,
      status: 'pending',
      createdAt: CURRENT.createdAt,
      updatedAt: CURRENT.updatedAt,
      version: 1,
    })) {
      assertRefused(
        () => validateCreate({ ...valid, [field]: value }),
        [[`/${field}`, 'read_only']],
      )
    }
  })

  it('gives one entry per offending field', () => {
    assertRefused(
      () => validateCreate({ email: 'nope', name: '', metadata: [], id: 'x', extra: 1 }),
      [
        ['/email', 'invalid_format'],
        ['/name', 'required'],
        ['/metadata', 'invalid_type'],
        ['/id', 'read_only'],
        ['/extra', 'unknown_field'],
      ],
    )
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
      id: '0193a5f2-7c1e-7d3a-9b2f-1c2d3e4f5a6c',
      status: 'suspended',
      createdAt: '2026-11-21T13:47:00.001Z',
      updatedAt: '2026-11-21T14:00:00Z',
      version: 5,
    }
    for (const [field, value] of Object.entries(changed)) {
      assertRefused(
        () => validateReplace({ ...CURRENT, [field]: value }, CURRENT),
        [[`/${field}`, 'read_only']],
      )
    }
    assertRefused(
      () => validateReplace({ ...CURRENT, version: '4' }, CURRENT),
      [['/version', 'read_only']],
    )
    try {
      validateReplace({ ...CURRENT, status: 'pending' }, CURRENT)
      assert.fail('status was accepted')
    } catch (error) {
      assert.ok(error instanceof ServiceError)
      const message = error.errors?.[0]?.message ?? ''
      assert.match(message, /read-only/)
      assert.match(message, /:activate/)
      assert.match(message, /:suspend/)
    }
  })

  it('refuses metadata null as a wrong type', () => {
    assertRefused(
      () => validateReplace({ ...valid, metadata: null }, CURRENT),
      [['/metadata', 'invalid_type']],
    )
  })

  it('requires email and name', () => {
    assertRefused(
      () => validateReplace({ metadata: {} }, CURRENT),
      [
        ['/email', 'required'],
        ['/name', 'required'],
      ],
    )
  })
})

describe('validatePatch', () => {
  it('changes only the named fields', () => {
    const input = validatePatch({ name: ' Countess ' }, CURRENT)
    assert.deepEqual(
      { ...input, metadata: { ...input.metadata } },
      {
        email: CURRENT.email,
        name: 'Countess',
        metadata: { ...CURRENT.metadata },
      },
    )
  })

  it('returns the stored values for {}', () => {
    const input = validatePatch({}, CURRENT)
    assert.deepEqual(
      { ...input, metadata: { ...input.metadata } },
      {
        email: CURRENT.email,
        name: CURRENT.name,
        metadata: { ...CURRENT.metadata },
      },
    )
  })

  it('merges metadata: null removes a key, a string sets one, others stay', () => {
    const input = validatePatch(
      { metadata: { level: null, missing: null, city: 'London' } },
      CURRENT,
    )
    assert.deepEqual({ ...input.metadata }, { team: 'analytics', city: 'London' })
    assert.deepEqual(
      { ...CURRENT.metadata },
      { team: 'analytics', level: '3' },
      'the stored metadata is not touched',
    )
  })

  it('removes all metadata for metadata null', () => {
    assert.deepEqual({ ...validatePatch({ metadata: null }, CURRENT).metadata }, {})
  })

  it('removes a __proto__ key with null like any other key', () => {
    const current: User = {
      ...CURRENT,
      metadata: JSON.parse('{"__proto__":"p","a":"b"}') as Record<string, string>,
    }
    const input = validatePatch(JSON.parse('{"metadata":{"__proto__":null}}'), current)
    assert.deepEqual(Object.keys(input.metadata), ['a'])
    const added = validatePatch(JSON.parse('{"metadata":{"constructor":"c"}}'), CURRENT)
    assert.equal(Object.hasOwn(added.metadata, 'constructor'), true)
    assert.equal(added.metadata['constructor'], 'c')
  })

  it('refuses merged metadata over 32 keys, but not a patch that stays at 32', () => {
    const current: User = { ...CURRENT, metadata: metadataOf(31) }
    assertRefused(
      () => validatePatch({ metadata: { x: '1', y: '2' } }, current),
      [['/metadata', 'too_many_keys']],
    )
    assert.equal(
      Object.keys(validatePatch({ metadata: { k0: null, x: '1', y: '2' } }, current).metadata)
        .length,
      32,
    )
  })

  it('refuses null for name and email as required', () => {
    assertRefused(
      () => validatePatch({ name: null, email: null }, CURRENT),
      [
        ['/name', 'required'],
        ['/email', 'required'],
      ],
    )
  })

  it('refuses bad values, unknown fields and changed output-only fields', () => {
    assertRefused(
      () =>
        validatePatch(
          { email: 'nope', metadata: { 'bad key': 'x', n: 1 }, foo: 1, status: 'suspended' },
          CURRENT,
        ),
      [
        ['/email', 'invalid_format'],
        ['/metadata/bad key', 'invalid_key'],
        ['/metadata/n', 'invalid_type'],
        ['/foo', 'unknown_field'],
        ['/status', 'read_only'],
      ],
    )
    assertRefused(() => validatePatch({ metadata: 'x' }, CURRENT), [['/metadata', 'invalid_type']])
    assertRefused(() => validatePatch({ metadata: [] }, CURRENT), [['/metadata', 'invalid_type']])
  })

  it('accepts output-only fields equal to the stored ones', () => {
    assert.equal(validatePatch({ ...CURRENT, name: 'Countess' }, CURRENT).name, 'Countess')
  })

  it('refuses bodies that are not objects', () => {
    for (const body of [null, [], 'x', 1, true])
      assertRefused(() => validatePatch(body, CURRENT), [['', 'invalid_type']])
  })
})

describe('validateEmptyBody', () => {
  it('accepts no body and {}', () => {
    assert.doesNotThrow(() => {
      validateEmptyBody(undefined)
    })
    assert.doesNotThrow(() => {
      validateEmptyBody({})
    })
  })

  it('refuses any field, each at its pointer', () => {
    assertRefused(() => {
      validateEmptyBody({ reason: 'x', status: 'active' })
    }, [
      ['/reason', 'unknown_field'],
      ['/status', 'unknown_field'],
    ])
  })

  it('refuses JSON that is not an object', () => {
    for (const body of [null, [], 'x', 0, false])
      assertRefused(() => {
        validateEmptyBody(body)
      }, [['', 'invalid_type']])
  })
})

describe('email edges', () => {
  it('refuses addresses a practical check must not take as invalid_format', () => {
    const cases = [
      'a@.example.com',
      'a@example.com.',
      'a@example..com',
      '@example.com',
      'a@b@example.com',
      'v@io',
      'a@b',
      'zoë@example',
      'a@example.com@',
      'a @example.com',
    ]
    for (const email of cases) {
      assertRefused(() => validateCreate({ email, name: 'Ada' }), [['/email', 'invalid_format']])
    }
  })

  it('refuses one or two characters as too_short, after trimming', () => {
    for (const email of ['a@', '@a', 'ab', 'a', ' a@ ', 'é@', `${EMOJI}@`]) {
      assertRefused(() => validateCreate({ email, name: 'Ada' }), [['/email', 'too_short']])
    }
  })

  it('accepts letters beyond ASCII, as given', () => {
    for (const email of ['zoë@example.com', 'zoe\u0308@example.com', 'ada@bücher.example']) {
      assert.equal(validateCreate({ email, name: 'Ada' }).email, email)
    }
  })

  it('takes a local part of 64 characters and refuses 65', () => {
    assert.equal(validateCreate({ email: makeEmail(64, 80), name: 'x' }).email, makeEmail(64, 80))
    const email = makeEmail(65, 81)
    assertRefused(() => validateCreate({ email, name: 'x' }), [['/email', 'too_long']])
  })

  it('takes an address of 254 characters and refuses 255', () => {
    assert.equal(validateCreate({ email: makeEmail(20, 254), name: 'x' }).email.length, 254)
    const email = makeEmail(20, 255)
    assertRefused(() => validateCreate({ email, name: 'x' }), [['/email', 'too_long']])
  })
})

describe('well-formed Unicode', () => {
  // Each high (D800-DBFF) and low (DC00-DFFF) surrogate edge alone, and a pair in the wrong order.
  const ILL_FORMED = ['\ud800', '\udbff', '\udc00', '\udfff', '\ude00\ud83d', `${EMOJI}\ud83d`]

  it('accepts the code points either side of the surrogates, and valid pairs', () => {
    const name = `x\ud7ff\ue000${EMOJI}\ud800\udc00y`
    const value = '\ud7ff\ue000\udbff\udfff'
    const input = validateCreate({ email: 'a\ue000@example.com', name, metadata: { k: value } })
    assert.equal(input.name, name)
    assert.equal(input.email, 'a\ue000@example.com')
    assert.equal(input.metadata['k'], value)
  })

  it('refuses a lone surrogate in email, name or a metadata value, each at its field', () => {
    for (const bad of ILL_FORMED) {
      const email = `ada${bad}@example.com`
      const body = { email, name: `Ada ${bad}`, metadata: { k: `v${bad}` } }
      assertRefused(
        () => validateCreate(body),
        [
          ['/email', 'invalid_characters'],
          ['/name', 'invalid_characters'],
          ['/metadata/k', 'invalid_characters'],
        ],
      )
      assertRefused(
        () => validateCreate({ email: 'a@example.com', name: bad }),
        [['/name', 'invalid_characters']],
      )
      assertRefused(
        () => validateReplace({ ...CURRENT, email: `a@exam${bad}ple.com` }, CURRENT),
        [['/email', 'invalid_characters']],
      )
      assertRefused(
        () => validatePatch({ name: `${bad}Ada` }, CURRENT),
        [['/name', 'invalid_characters']],
      )
    }
  })

  it('refuses a lone surrogate before any other rule of the field', () => {
    assertRefused(
      () => validateCreate({ email: 'x\ud800', name: `${'n'.repeat(300)}\ud800` }),
      [
        ['/email', 'invalid_characters'],
        ['/name', 'invalid_characters'],
      ],
    )
    const metadata = { 'bad key\ud800': 's'.repeat(600) }
    assertRefused(
      () => validateCreate({ ...valid, metadata }),
      [['/metadata/bad key\ud800', 'invalid_characters']],
    )
    assertRefused(
      () => validateCreate({ ...valid, metadata: { o: { x: ['\udc00'] } } }),
      [['/metadata/o', 'invalid_characters']],
    )
    assertRefused(
      () => validateCreate({ ...valid, metadata: ['\udfff'] }),
      [['/metadata', 'invalid_characters']],
    )
    assertRefused(
      () => validatePatch({ metadata: '\udfff' }, CURRENT),
      [['/metadata', 'invalid_characters']],
    )
  })

  it('refuses a lone surrogate in a metadata key, even one a patch removes', () => {
    assertRefused(
      () => validatePatch({ metadata: { 'team\ud800': null } }, CURRENT),
      [['/metadata/team\ud800', 'invalid_characters']],
    )
    assertRefused(
      () => validateCreate({ ...valid, metadata: { '\udbff': 'v' } }),
      [['/metadata/\udbff', 'invalid_characters']],
    )
  })

  it('refuses a lone surrogate in unknown and read-only fields, names included', () => {
    const deep = { a: [1, { b: '\udfff' }] }
    assertRefused(
      () => validateCreate({ ...valid, nickname: '\ud800', deep }),
      [
        ['/nickname', 'invalid_characters'],
        ['/deep', 'invalid_characters'],
      ],
    )
    assertRefused(
      () => validateCreate({ ...valid, 'x\ud800': 1, ok: { 'k\udc00': 1 } }),
      [
        ['/x\ud800', 'invalid_characters'],
        ['/ok', 'invalid_characters'],
      ],
    )
    assertRefused(
      () => validateCreate({ ...valid, status: 'active\ud800' }),
      [['/status', 'invalid_characters']],
    )
    const createdAt = `${CURRENT.createdAt}\udbff`
    assertRefused(
      () => validateReplace({ ...CURRENT, createdAt }, CURRENT),
      [['/createdAt', 'invalid_characters']],
    )
    assertRefused(() => validatePatch({ id: '\udc00' }, CURRENT), [['/id', 'invalid_characters']])
    assertRefused(() => {
      validateEmptyBody({ reason: '\ud800', ok: 1 })
    }, [
      ['/reason', 'invalid_characters'],
      ['/ok', 'unknown_field'],
    ])
  })

  it('finds a lone surrogate under any depth of nesting without overflowing the stack', () => {
    const depth = 30_000
    const nested = (inner: string): unknown =>
      JSON.parse(
        `{"email":"a@example.com","name":"A","x":${'['.repeat(depth)}${inner}${']'.repeat(depth)}}`,
      )
    assertRefused(() => validateCreate(nested('"\\ud800"')), [['/x', 'invalid_characters']])
    assertRefused(() => validateCreate(nested('"ok"')), [['/x', 'unknown_field']])
  })
})

describe('visible characters', () => {
  // Every one is White_Space or Default_Ignorable_Code_Point; String.prototype.trim keeps most.
  const INVISIBLE = [
    '\u200b',
    '\u200c',
    '\u200d',
    '\u2060',
    '\u00ad',
    '\u034f',
    '\u180e',
    '\u3164',
    '\u115f',
    '\uffa0',
    '\u{e0001}',
    '\u{e0020}',
    '\u200b\u200d\u2060',
    '\u200b \u200b',
    '\u00a0\u200b\u3000',
  ]

  it('refuses a name of only white space and zero-width characters, saying why', () => {
    for (const name of INVISIBLE) {
      const problem = problemOf(() => validateCreate({ email: 'ada@example.com', name }))
      assert.deepEqual(
        problem.errors?.map((error) => [error.pointer, error.code]),
        [['/name', 'invalid_characters']],
        JSON.stringify(name),
      )
      assert.match(problem.errors?.[0]?.message ?? '', /nothing visible/)
      assertRefused(() => validatePatch({ name }, CURRENT), [['/name', 'invalid_characters']])
    }
  })

  it('refuses a name of only a byte order mark as required: trimming removes it', () => {
    assertRefused(
      () => validateCreate({ email: 'ada@example.com', name: '\ufeff' }),
      [['/name', 'required']],
    )
  })

  it('accepts zero-width characters between or beside visible ones', () => {
    const names = [
      '👨\u200d👩\u200d👧',
      '\u0915\u094d\u200d\u0937',
      'Ada\u200bLovelace',
      '\u200bAda',
      'x\u00ad',
      '\u0930\u094d\u200d',
      'Ada\u2060',
    ]
    for (const name of names) {
      assert.equal(validateCreate({ email: 'a@example.com', name }).name, name)
    }
  })

  it('refuses an email whose local part or a domain label is only invisible characters', () => {
    const cases = [
      '\u200b@example.com',
      '\u200d\u2060@example.com',
      'a@\u200b.com',
      'a@example.\u200b',
      'a@\u00ad.example.com',
      'a@example.\u3164',
      '\u{e0001}@example.com',
      'a@b.\u034f\u180e',
    ]
    for (const email of cases) {
      const problem = problemOf(() => validateCreate({ email, name: 'Ada' }))
      assert.deepEqual(
        problem.errors?.map((error) => [error.pointer, error.code]),
        [['/email', 'invalid_format']],
        JSON.stringify(email),
      )
      assert.match(problem.errors?.[0]?.message ?? '', /visible/)
    }
  })

  it('accepts an email whose every part holds a visible character', () => {
    for (const email of ['a\u200b@example.com', 'a@\u00adb.example.com', 'a@example.c\u200dom']) {
      assert.equal(validateCreate({ email, name: 'Ada' }).email, email)
    }
  })
})

describe('the size of a 422', () => {
  const RULES = 'The request breaks the rules of:'
  const badKeys = (count: number): Record<string, number> =>
    Object.fromEntries(Array.from({ length: count }, (_, i) => [`!${i.toString(36)}`, 0]))
  const pointersOf = (problem: ServiceError): string[] =>
    (problem.errors ?? []).map((error) => error.pointer)

  it('lists the first 20 field errors in body order and says more were left out', () => {
    const problem = problemOf(() => validatePatch({ metadata: badKeys(7000) }, CURRENT))
    assert.deepEqual(
      pointersOf(problem),
      Object.keys(badKeys(20)).map((key) => `/metadata/${key}`),
    )
    assert.ok(problem.errors?.every((error) => error.code === 'invalid_key'))
    assert.equal(
      problem.detail,
      `${RULES} /metadata/!0, /metadata/!1, /metadata/!2 and 17 more ` +
        'fields. Only the first 20 errors are listed.',
    )
  })

  it('sends 20 errors without the note, and 20 of 21 with it', () => {
    const fields = (count: number): Record<string, number> =>
      Object.fromEntries(Array.from({ length: count }, (_, i) => [`f${i}`, i]))
    const twenty = problemOf(() => validateCreate({ ...valid, ...fields(20) }))
    assert.equal(twenty.errors?.length, 20)
    assert.equal(twenty.detail, `${RULES} /f0, /f1, /f2 and 17 more fields.`)
    const more = problemOf(() => validateCreate({ ...valid, ...fields(21) }))
    assert.deepEqual(
      pointersOf(more),
      Object.keys(fields(20)).map((key) => `/${key}`),
    )
    assert.match(more.detail, /and 17 more fields\. Only the first 20 errors are listed\.$/)
  })

  it('keeps body order across fields, with missing required fields last', () => {
    const problem = problemOf(() =>
      validateCreate({
        zz: 1,
        email: 'bad',
        metadata: { 'b k': 'x', ok: 'y', n: 1 },
        id: 'x',
      }),
    )
    assert.deepEqual(
      problem.errors?.map((error) => [error.pointer, error.code]),
      [
        ['/zz', 'unknown_field'],
        ['/email', 'invalid_format'],
        ['/metadata/b k', 'invalid_key'],
        ['/metadata/n', 'invalid_type'],
        ['/id', 'read_only'],
        ['/name', 'required'],
      ],
    )
    assert.equal(problem.detail, `${RULES} /zz, /email, /metadata/b k and 3 more fields.`)
  })

  it('names up to three fields in the detail, and the body as "the body"', () => {
    const detail = (action: () => unknown): string => problemOf(action).detail
    assert.equal(
      detail(() => validateCreate({ email: 'bad', name: 'A' })),
      `${RULES} /email.`,
    )
    assert.equal(
      detail(() => validateCreate({ name: '' })),
      `${RULES} /name, /email.`,
    )
    const five = detail(() => validateCreate({ a: 1, b: 2, c: 3 }))
    assert.equal(five, `${RULES} /a, /b, /c and 2 more fields.`)
    const four = detail(() => validateCreate({ a: 1, b: 2, c: 3, email: 'a@example.com' }))
    assert.equal(four, `${RULES} /a, /b, /c and 1 more field.`)
    assert.equal(
      detail(() => validateCreate(null)),
      `${RULES} the body.`,
    )
  })

  it('cuts a long pointer in the detail to 40 characters, but sends it whole in errors[]', () => {
    const key = 'k'.repeat(10_000)
    const problem = problemOf(() => validateCreate({ ...valid, [key]: 1 }))
    assert.deepEqual(pointersOf(problem), [`/${key}`])
    assert.equal(problem.detail, `${RULES} /${'k'.repeat(38)}….`)
    const fits = problemOf(() => validateCreate({ ...valid, ['k'.repeat(39)]: 1 }))
    assert.equal(fits.detail, `${RULES} /${'k'.repeat(39)}.`)
  })

  it('counts code points when it cuts, never splitting a pair', () => {
    const fits = problemOf(() => validateCreate({ ...valid, [EMOJI.repeat(39)]: 1 }))
    assert.equal(fits.detail, `${RULES} /${EMOJI.repeat(39)}.`)
    const cut = problemOf(() => validateCreate({ ...valid, [EMOJI.repeat(40)]: 1 }))
    assert.equal(cut.detail, `${RULES} /${EMOJI.repeat(38)}….`)
    assert.doesNotMatch(cut.detail, /\p{Surrogate}/u)
  })

  it("never repeats a client's key in a message", () => {
    const key = 'k'.repeat(10_000)
    const messages = [
      ...(problemOf(() => validateCreate({ ...valid, [key]: 1 })).errors ?? []),
      ...(problemOf(() => validateCreate({ ...valid, metadata: { [key]: 'v' } })).errors ?? []),
      ...(problemOf(() => {
        validateEmptyBody({ [key]: 1 })
      }).errors ?? []),
    ].map((error) => error.message)
    assert.equal(messages.length, 3)
    for (const message of messages) {
      assert.ok(message.length < 120 && !message.includes('kkkk'), message)
    }
  })
})

describe('read-only hints', () => {
  it('points status, and only status, to :activate and :suspend', () => {
    const messageOf = (action: () => unknown): string =>
      problemOf(action).errors?.[0]?.message ?? ''
    const changed: Record<string, unknown> = {
      id: '0193a5f2-7c1e-7d3a-9b2f-1c2d3e4f5a6c',
      createdAt: '2026-11-21T13:47:00.001Z',
      updatedAt: '2026-11-21T14:00:00Z',
      version: 5,
    }
    for (const [field, value] of Object.entries(changed)) {
      for (const message of [
        messageOf(() => validateReplace({ ...CURRENT, [field]: value }, CURRENT)),
        messageOf(() => validatePatch({ [field]: value }, CURRENT)),
        messageOf(() => validateCreate({ ...valid, [field]: value })),
      ]) {
        assert.match(message, new RegExp(`^${field} is read-only`))
        assert.doesNotMatch(message, /:activate|:suspend/)
      }
    }
    for (const message of [
      messageOf(() => validateReplace({ ...CURRENT, status: 'suspended' }, CURRENT)),
      messageOf(() => validateCreate({ ...valid, status: 'active' })),
    ]) {
      assert.match(message, /^status is read-only/)
      assert.match(message, /:activate/)
      assert.match(message, /:suspend/)
    }
  })
})

describe('read-only messages', () => {
  function messageOf(action: () => unknown, pointer: string): string {
    const error = problemOf(action).errors?.find((entry) => entry.pointer === pointer)
    assert.ok(error !== undefined, `an error at ${pointer}`)
    return error.message
  }

  it('says the server sets a field on create, with no hint for fields other than status', () => {
    for (const field of ['id', 'createdAt', 'updatedAt', 'version']) {
      assert.equal(
        messageOf(() => validateCreate({ ...valid, [field]: 'x' }), `/${field}`),
        `${field} is read-only: it is set by the server.`,
      )
    }
  })

  it('asks for the stored value on replace and patch, with no hint for fields other than status', () => {
    for (const field of ['id', 'createdAt', 'updatedAt', 'version']) {
      const expected = `${field} is read-only: send its stored value or leave it out.`
      assert.equal(
        messageOf(() => validateReplace({ ...CURRENT, [field]: 'x' }, CURRENT), `/${field}`),
        expected,
      )
      assert.equal(
        messageOf(() => validatePatch({ [field]: 'x' }, CURRENT), `/${field}`),
        expected,
      )
    }
  })

  it('points status to the custom methods, on create and on replace', () => {
    const hint = '; change it with POST /users/{id}:activate or POST /users/{id}:suspend'
    assert.equal(
      messageOf(() => validateCreate({ ...valid, status: 'active' }), '/status'),
      `status is read-only: it is set by the server${hint}.`,
    )
    assert.equal(
      messageOf(() => validateReplace({ ...CURRENT, status: 'pending' }, CURRENT), '/status'),
      `status is read-only: send its stored value or leave it out${hint}.`,
    )
  })
})

describe('mutation-found edges', () => {
  const RULES = 'The request breaks the rules of:'

  it('refuses a domain with an empty first or last label by the shape rule, not the visibility rule', () => {
    for (const email of ['a@.example.com', 'a@example.com.']) {
      const error = problemOf(() => validateCreate({ email, name: 'Ada' })).errors?.[0]
      assert.equal(error?.code, 'invalid_format', email)
      assert.equal(error?.message, 'email must look like local@domain.tld, without spaces.', email)
    }
  })

  it('refuses a missing (undefined) email or name as required', () => {
    assertRefused(
      () => validateCreate({ email: undefined, name: undefined }),
      [
        ['/email', 'required'],
        ['/name', 'required'],
      ],
    )
  })

  it('says metadata must be an object of strings on create, and that null removes it on patch', () => {
    const create = problemOf(() => validateCreate({ ...valid, metadata: 7 })).errors?.[0]
    assert.equal(create?.message, 'metadata must be an object of strings.')
    const patch = problemOf(() => validatePatch({ metadata: 7 }, CURRENT)).errors?.[0]
    assert.equal(patch?.message, 'metadata must be an object (or null to remove it all).')
  })

  it('reports only the bad entry, not too_many_keys, when 33 keys hold a bad one', () => {
    const bad: Array<[string, unknown, string]> = [
      ['b k', 'x', 'invalid_key'],
      ['n', 1, 'invalid_type'],
      ['s', 's'.repeat(513), 'too_long'],
      ['\ud800', 'x', 'invalid_characters'],
    ]
    for (const [key, value, code] of bad) {
      const metadata = { ...metadataOf(32), [key]: value }
      assertRefused(() => validateCreate({ ...valid, metadata }), [[`/metadata/${key}`, code]])
    }
  })

  it('counts a surrogate pair at each edge of the ranges as one character', () => {
    for (const pair of ['\ud800\udc00', '\udbff\udfff', '\ud800\udfff', '\udbff\udc00']) {
      assert.equal(validateCreate({ ...valid, name: pair.repeat(200) }).name, pair.repeat(200))
      assertRefused(
        () => validateCreate({ ...valid, name: pair.repeat(201) }),
        [['/name', 'too_long']],
      )
    }
  })

  it('names exactly three fields without "and 0 more"', () => {
    assert.equal(
      problemOf(() => validateCreate({ a: 1, b: 2, email: 'a@example.com', name: 'x', c: 3 }))
        .detail,
      `${RULES} /a, /b, /c.`,
    )
  })

  it('cuts a pointer of 41 to 80 characters too', () => {
    const key = 'k'.repeat(49)
    assert.equal(
      problemOf(() => validateCreate({ ...valid, [key]: 1 })).detail,
      `${RULES} /${'k'.repeat(38)}….`,
    )
  })
})

describe('an email of only invisible characters', () => {
  it("is refused by the email shape rule (the visibility rule is the name's)", () => {
    const error = problemOf(() => validateCreate({ email: '\u200b\u200b\u200b', name: 'Ada' }))
      .errors?.[0]
    assert.equal(error?.pointer, '/email')
    assert.equal(error?.code, 'invalid_format')
    assert.equal(error?.message, 'email must look like local@domain.tld, without spaces.')
  })
})
