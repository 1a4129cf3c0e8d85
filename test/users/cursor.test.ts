import assert from 'node:assert/strict'
import { createHmac } from 'node:crypto'
import { describe, it } from 'node:test'

import { ServiceError } from '../../src/domain/errors.js'
import { toHttpError } from '../../src/http/problem.js'
import { type CursorState, createCursorCodec } from '../../src/users/cursor.js'

const SECRET = Buffer.from('cursor-test-secret-0123456789-abcdefgh')
const OTHER_SECRET = Buffer.from('cursor-test-secret-0123456789-abcdefgX')

const FULL: CursorState = {
  after: '0193a5f2-7c1e-7d3a-9b2f-1c2d3e4f5a6b',
  sort: '-createdAt',
  statuses: ['active', 'suspended'],
  email: 'ada@example.com',
  q: 'lovelace',
}

const BARE: CursorState = {
  after: '0193a5f2-7c1e-7d3a-9b2f-1c2d3e4f5a6c',
  sort: 'createdAt',
  statuses: undefined,
  email: undefined,
  q: undefined,
}

function assertBadCursor(decode: () => unknown): void {
  assert.throws(decode, (error: unknown) => {
    assert.ok(error instanceof ServiceError, String(error))
    assert.equal(toHttpError(error).status, 400)
    assert.equal(error.code, 'bad_request')
    assert.match(error.detail, /cursor/)
    return true
  })
}

/** The same text with the character at `index` swapped for another base64url character. */
function replaceAt(text: string, index: number): string {
  const char = text[index] ?? ''
  const swapped = char === 'A' ? 'B' : 'A'
  return `${text.slice(0, index)}${swapped}${text.slice(index + 1)}`
}

describe('createCursorCodec', () => {
  it('decodes what it encodes, with and without filters', () => {
    const codec = createCursorCodec(SECRET)
    assert.deepEqual(codec.decode(codec.encode(FULL)), FULL)
    assert.deepEqual(codec.decode(codec.encode(BARE)), BARE)
  })

  it('keeps filter text with any characters', () => {
    const codec = createCursorCodec(SECRET)
    const state: CursorState = { ...BARE, q: 'é "quoted" 😀 \\ / . ,', email: 'a.b+c@example.com' }
    assert.deepEqual(codec.decode(codec.encode(state)), state)
  })

  it('makes opaque, URL-safe text', () => {
    const text = createCursorCodec(SECRET).encode(FULL)
    assert.match(text, /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/)
    assert.doesNotMatch(text, /lovelace|example/)
  })

  it('decodes a cursor made by another codec with the same secret (a restart)', () => {
    const text = createCursorCodec(SECRET).encode(FULL)
    assert.deepEqual(createCursorCodec(Buffer.from(SECRET)).decode(text), FULL)
  })

  it('refuses a cursor made with another secret', () => {
    const text = createCursorCodec(OTHER_SECRET).encode(FULL)
    assertBadCursor(() => createCursorCodec(SECRET).decode(text))
  })

  it('refuses a cursor with any one character of its payload or signature changed', () => {
    const codec = createCursorCodec(SECRET)
    const text = codec.encode(FULL)
    for (let i = 0; i < text.length; i += 1) {
      if (text[i] === '.') continue
      assertBadCursor(() => codec.decode(replaceAt(text, i)))
    }
  })

  it('refuses a signature spelled with other unused low bits (same bytes, other text)', () => {
    const codec = createCursorCodec(SECRET)
    const text = codec.encode(FULL)
    const last = text.slice(-1)
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'
    // A 32-byte HMAC takes 43 characters: the last one carries 4 bits and 2 unused ones.
    const sibling = alphabet[alphabet.indexOf(last) ^ 1] ?? ''
    const variant = `${text.slice(0, -1)}${sibling}`
    assert.deepEqual(
      Buffer.from(variant.split('.')[1] ?? '', 'base64url'),
      Buffer.from(text.split('.')[1] ?? '', 'base64url'),
      'the variant decodes to the same bytes',
    )
    assertBadCursor(() => codec.decode(variant))
  })

  it('refuses truncated, extended and garbage cursors', () => {
    const codec = createCursorCodec(SECRET)
    const text = codec.encode(FULL)
    const [payload = '', signature = ''] = text.split('.')
    const cases = [
      text.slice(0, -1),
      text.slice(1),
      `${text}A`,
      `A${text}`,
      `${text}.`,
      `${text}.${signature}`,
      payload,
      `${payload}.`,
      `.${signature}`,
      signature,
      '',
      '.',
      '..',
      'abc',
      'a.b',
      'null',
      `${Buffer.from('[1]').toString('base64url')}.${signature}`,
      ' '.repeat(10),
      `${text} `,
    ]
    for (const candidate of cases) assertBadCursor(() => codec.decode(candidate))
  })

  it("refuses a cursor whose payload was swapped with another valid cursor's", () => {
    const codec = createCursorCodec(SECRET)
    const [payloadA = ''] = codec.encode(FULL).split('.')
    const [, signatureB = ''] = codec.encode(BARE).split('.')
    assertBadCursor(() => codec.decode(`${payloadA}.${signatureB}`))
  })
})

/**
 * A correctly signed cursor around any payload text: the key derivation the service documents in
 * src/users/cursor.ts, so that the checks behind the signature can be reached.
 */
function forge(secret: Buffer, json: string): string {
  const key = createHmac('sha256', secret).update('user-service cursor key v1').digest()
  const payload = Buffer.from(json).toString('base64url')
  return `${payload}.${createHmac('sha256', key).update(payload).digest('base64url')}`
}

describe('createCursorCodec: signed payloads it did not make', () => {
  const codec = createCursorCodec(SECRET)
  const AFTER = FULL.after

  it('derives its key from the secret with the documented label', () => {
    const text = forge(SECRET, JSON.stringify([1, AFTER, 'createdAt', null, null, null]))
    assert.deepEqual(codec.decode(text), { ...BARE, after: AFTER })
    assert.deepEqual(
      codec.decode(
        forge(SECRET, JSON.stringify([1, AFTER, '-createdAt', ['pending'], 'a@b.c', 'x'])),
      ),
      {
        after: AFTER,
        sort: '-createdAt',
        statuses: ['pending'],
        email: 'a@b.c',
        q: 'x',
      },
    )
  })

  const refused: [string, string][] = [
    ['not JSON', '[1,'],
    [
      'an object, not an array',
      JSON.stringify({ 0: 1, 1: AFTER, 2: 'createdAt', 3: null, 4: null, 5: null, length: 6 }),
    ],
    ['five elements', JSON.stringify([1, AFTER, 'createdAt', null, null])],
    ['seven elements', JSON.stringify([1, AFTER, 'createdAt', null, null, null, null])],
    ['version 2', JSON.stringify([2, AFTER, 'createdAt', null, null, null])],
    ['version "1"', JSON.stringify(['1', AFTER, 'createdAt', null, null, null])],
    ['a numeric after', JSON.stringify([1, 7, 'createdAt', null, null, null])],
    [
      'an after that is not a canonical UUID',
      JSON.stringify([1, AFTER.toUpperCase(), 'createdAt', null, null, null]),
    ],
    ['an unknown sort', JSON.stringify([1, AFTER, 'name', null, null, null])],
    ['a missing sort', JSON.stringify([1, AFTER, null, null, null, null])],
    [
      'statuses that are not an array',
      JSON.stringify([1, AFTER, 'createdAt', 'active', null, null]),
    ],
    [
      'an unknown status',
      JSON.stringify([1, AFTER, 'createdAt', ['active', 'deleted'], null, null]),
    ],
    ['a numeric email', JSON.stringify([1, AFTER, 'createdAt', null, 5, null])],
    ['a numeric q', JSON.stringify([1, AFTER, 'createdAt', null, null, false])],
  ]
  for (const [what, json] of refused) {
    it(`refuses a correctly signed payload with ${what}`, () => {
      assertBadCursor(() => codec.decode(forge(SECRET, json)))
    })
  }

  it('refuses a cursor without a signature part', () => {
    assertBadCursor(() => codec.decode(Buffer.from('[1]').toString('base64url')))
  })
})
