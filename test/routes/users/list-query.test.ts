import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { ServiceError } from '../../../src/domain/errors.js'
import { toHttpError } from '../../../src/http/problem.js'
import { parseListQuery } from '../../../src/routes/users/list-query.js'
import { type CursorState, createCursorCodec } from '../../../src/users/cursor.js'

const codec = createCursorCodec(Buffer.from('list-query-test-secret-0123456789-abcd'))
const AFTER = '0193a5f2-7c1e-7d3a-9b2f-1c2d3e4f5a6b'

function assertBadQuery(rawQuery: string, parameter: string | RegExp): void {
  assert.throws(
    () => parseListQuery(rawQuery, codec),
    (error: unknown) => {
      assert.ok(error instanceof ServiceError, String(error))
      assert.equal(toHttpError(error).status, 400)
      assert.equal(error.code, 'bad_request')
      assert.match(
        error.detail,
        typeof parameter === 'string' ? new RegExp(`\\b${parameter}\\b`) : parameter,
      )
      return true
    },
    rawQuery,
  )
}

describe('parseListQuery', () => {
  it('reads an empty query as the first page of 20, oldest first, unfiltered', () => {
    const { query, walk } = parseListQuery('', codec)
    assert.deepEqual(query, { filter: {}, order: 'asc', limit: 20 })
    assert.deepEqual(walk, {
      sort: 'createdAt',
      statuses: undefined,
      email: undefined,
      q: undefined,
    })
  })

  it('reads every parameter', () => {
    const { query, walk } = parseListQuery(
      'limit=5&status=suspended,active&email=Ada@Example.com&q=LOVE&sort=-createdAt',
      codec,
    )
    assert.deepEqual(query, {
      filter: { statuses: ['active', 'suspended'], email: 'ada@example.com', q: 'love' },
      order: 'desc',
      limit: 5,
    })
    assert.deepEqual(walk, {
      sort: '-createdAt',
      statuses: ['active', 'suspended'],
      email: 'ada@example.com',
      q: 'love',
    })
  })

  it('accepts limits 1 and 100, and leading zeros', () => {
    assert.equal(parseListQuery('limit=1', codec).query.limit, 1)
    assert.equal(parseListQuery('limit=100', codec).query.limit, 100)
    assert.equal(parseListQuery('limit=007', codec).query.limit, 7)
  })

  it('refuses limits outside 1..100 or not whole numbers, naming limit', () => {
    for (const value of [
      '0',
      '101',
      '-1',
      'abc',
      '1.5',
      '20abc',
      '1e1',
      '0x10',
      '+5',
      '%205',
      '1000',
      '５',
    ]) {
      assertBadQuery(`limit=${value}`, 'limit')
    }
  })

  it('refuses an empty or a repeated parameter, naming it', () => {
    assertBadQuery('limit=', 'limit')
    assertBadQuery('limit', 'limit')
    assertBadQuery('q=+++', 'q')
    assertBadQuery('limit=1&limit=2', 'limit')
    assertBadQuery('status=active&status=pending', 'status')
  })

  it('refuses a NUL in any parameter, naming it, whatever else the value holds', () => {
    const cursor = codec.encode({
      after: AFTER,
      sort: 'createdAt',
      statuses: undefined,
      email: undefined,
      q: undefined,
    })
    for (const [query, parameter] of [
      ['q=a%00b', 'q'],
      ['q=%00', 'q'],
      ['email=a%00b@x.io', 'email'],
      ['status=active%00', 'status'],
      ['sort=%00', 'sort'],
      ['limit=5%00', 'limit'],
      [`cursor=${cursor}%00`, 'cursor'],
      ['ids=%00', 'ids'],
      ['q=ok&email=%00@x.io', 'email'],
    ] as const) {
      assert.throws(
        () => parseListQuery(query, codec),
        {
          name: 'HttpError',
          code: 'bad_request',
          detail: `The query parameter ${parameter} must not contain a NUL character (U+0000).`,
        },
        query,
      )
    }
  })

  it('refuses unknown parameters, naming them', () => {
    assertBadQuery('foo=1', 'foo')
    assertBadQuery('limit=5&page=2', 'page')
    assertBadQuery('Limit=5', 'Limit')
    assertBadQuery('__proto__=1', /__proto__/)
    assertBadQuery('constructor=1', 'constructor')
  })

  it('ignores empty pairs between ampersands', () => {
    assert.equal(parseListQuery('&&limit=3&', codec).query.limit, 3)
  })

  it('percent-decodes names and values, with + as a space', () => {
    assert.equal(parseListQuery('%6C%69mit=4', codec).query.limit, 4)
    assert.equal(parseListQuery('q=Ada+Lovelace', codec).query.filter.q, 'ada lovelace')
    assert.equal(parseListQuery('q=%41da%20L', codec).query.filter.q, 'ada l')
    assert.equal(parseListQuery('q=%C3%A9t%C3%A9', codec).query.filter.q, 'été')
    assert.equal(parseListQuery('q=a%2Bb', codec).query.filter.q, 'a+b')
    assert.equal(
      parseListQuery('email=ada%2Btag%40example.com', codec).query.filter.email,
      'ada+tag@example.com',
    )
    assert.equal(
      parseListQuery('email=ada+tag@example.com', codec).query.filter.email,
      'ada tag@example.com',
    )
    assert.equal(parseListQuery('q=100%25', codec).query.filter.q, '100%')
  })

  it('refuses invalid percent escapes and invalid UTF-8 with a 400', () => {
    for (const raw of [
      'q=%',
      'q=%4',
      'q=%zz',
      'q=%G1',
      'q=%C3',
      'q=%FF',
      'q=%C0%AF',
      'q=%ED%A0%80',
    ]) {
      assertBadQuery(raw, 'q')
    }
    assertBadQuery('%zz=1', /%zz/)
  })

  it('reads a comma list of statuses, in any order and with spaces', () => {
    assert.deepEqual(parseListQuery('status=pending', codec).query.filter.statuses, ['pending'])
    assert.deepEqual(parseListQuery('status=suspended,pending', codec).query.filter.statuses, [
      'pending',
      'suspended',
    ])
    assert.deepEqual(parseListQuery('status=active,+pending,active', codec).query.filter.statuses, [
      'active',
      'pending',
    ])
    assert.deepEqual(parseListQuery('status=active%2Cpending', codec).query.filter.statuses, [
      'active',
      'pending',
    ])
  })

  it('refuses unknown statuses, naming status', () => {
    for (const value of [
      'deleted',
      'Active',
      'active,',
      ',active',
      'active,,pending',
      'active;pending',
    ]) {
      assertBadQuery(`status=${value}`, 'status')
    }
  })

  it('refuses a sort other than createdAt or -createdAt, naming sort', () => {
    for (const value of ['name', 'createdat', '+createdAt', '-id', 'createdAt,-createdAt']) {
      assertBadQuery(`sort=${value}`, 'sort')
    }
  })

  it('takes filters and sort from a cursor sent alone', () => {
    const state: CursorState = {
      after: AFTER,
      sort: '-createdAt',
      statuses: ['active'],
      email: undefined,
      q: 'ada',
    }
    const { query, walk } = parseListQuery(`cursor=${codec.encode(state)}&limit=7`, codec)
    assert.deepEqual(query, {
      filter: { statuses: ['active'], q: 'ada' },
      order: 'desc',
      after: AFTER,
      limit: 7,
    })
    assert.deepEqual(walk, state)
  })

  it('accepts a cursor with the same filters and sort, however they are spelled', () => {
    const state: CursorState = {
      after: AFTER,
      sort: '-createdAt',
      statuses: ['active', 'pending'],
      email: 'ada@example.com',
      q: 'ada',
    }
    const cursor = codec.encode(state)
    const { query } = parseListQuery(
      `cursor=${cursor}&status=pending,active&email=+ADA@example.com&q=ADA&sort=-createdAt`,
      codec,
    )
    assert.equal(query.after, AFTER)
    assert.equal(query.order, 'desc')
  })

  it('refuses a cursor sent with other filters or sort, naming cursor', () => {
    const state: CursorState = {
      after: AFTER,
      sort: 'createdAt',
      statuses: ['active'],
      email: 'ada@example.com',
      q: 'ada',
    }
    const cursor = codec.encode(state)
    for (const extra of [
      'status=pending',
      'status=active,pending',
      'sort=-createdAt',
      'email=bob@example.com',
      'q=bob',
    ]) {
      assertBadQuery(`cursor=${cursor}&${extra}`, 'cursor')
    }
    const bare = codec.encode({
      after: AFTER,
      sort: 'createdAt',
      statuses: undefined,
      email: undefined,
      q: undefined,
    })
    for (const extra of ['status=active', 'sort=-createdAt', 'email=ada@example.com', 'q=ada']) {
      assertBadQuery(`cursor=${bare}&${extra}`, 'cursor')
    }
  })

  it("refuses a cursor that is not one of this codec's, naming cursor", () => {
    const foreign = createCursorCodec(Buffer.from('another-secret-for-cursors-0123456789')).encode({
      after: AFTER,
      sort: 'createdAt',
      statuses: undefined,
      email: undefined,
      q: undefined,
    })
    for (const cursor of [foreign, 'garbage', 'a.b', `${foreign}x`])
      assertBadQuery(`cursor=${cursor}`, 'cursor')
  })

  it('refuses a q longer than 200 characters', () => {
    assert.equal(parseListQuery(`q=${'a'.repeat(200)}`, codec).query.filter.q, 'a'.repeat(200))
    assertBadQuery(`q=${'a'.repeat(201)}`, 'q')
  })

  it('counts q in code points, not UTF-16 units', () => {
    const emoji = encodeURIComponent('😀')
    assert.equal(parseListQuery(`q=${emoji.repeat(200)}`, codec).query.filter.q, '😀'.repeat(200))
    assertBadQuery(`q=${emoji.repeat(201)}`, 'q')
  })
})
