import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { readProblem } from '../../admin/src/problem.js'
import {
  formBody,
  formValues,
  isUser,
  readJson,
  type User,
  userFields,
  writeJson,
} from '../../admin/src/user-view.js'

const ada: User = {
  id: '0193a5f2-7c1e-7d3a-9b2f-1c2d3e4f5a6b',
  email: 'ada@example.com',
  name: 'Ada Lovelace',
  status: 'pending',
  metadata: new Map([['team', 'analytics']]),
  createdAt: '2026-11-21T13:47:00.000Z',
  updatedAt: '2026-11-21T13:48:00.000Z',
  version: 2,
}

describe('the admin page: rendering a user', () => {
  it('shows every field, labelled, in order, metadata as JSON', () => {
    assert.deepEqual(userFields(ada), [
      ['id', ada.id],
      ['email', 'ada@example.com'],
      ['name', 'Ada Lovelace'],
      ['status', 'pending'],
      ['metadata', '{"team":"analytics"}'],
      ['version', '2'],
      ['createdAt', '2026-11-21T13:47:00.000Z'],
      ['updatedAt', '2026-11-21T13:48:00.000Z'],
    ])
  })

  it('shows tokensValidAfter last, once the user has one', () => {
    const revoked: User = { ...ada, tokensValidAfter: '2026-11-21T13:49:01.000Z' }
    assert.deepEqual(userFields(revoked).at(-1), ['tokensValidAfter', '2026-11-21T13:49:01.000Z'])
    assert.equal(userFields(revoked).length, userFields(ada).length + 1)
    assert.equal(isUser(revoked), true)
    assert.equal(isUser({ ...ada, tokensValidAfter: 1 }), false)
  })

  it('tells a user from other JSON', () => {
    assert.equal(isUser(ada), true)
    assert.equal(isUser({ ...ada, version: '2' }), false)
    assert.equal(isUser({ ...ada, metadata: null }), false)
    // Metadata is read into a Map (readJson), which keeps the order of its keys.
    assert.equal(isUser({ ...ada, metadata: { team: 'analytics' } }), false)
    assert.equal(isUser(null), false)
    assert.equal(isUser({ items: [] }), false)
  })

  it('fills a form with the editable fields, and sends what is typed as is', () => {
    assert.deepEqual(formValues(ada), {
      email: 'ada@example.com',
      name: 'Ada Lovelace',
      metadata: '{"team":"analytics"}',
    })
    // No trimming, no checks of its own: the server's rules and words are the only ones.
    assert.deepEqual(formBody({ email: ' not an email ', name: '', metadata: '{"a":"b"}' }), {
      ok: true,
      body: { email: ' not an email ', name: '', metadata: new Map([['a', 'b']]) },
    })
    assert.deepEqual(formBody({ email: 'a@b.co', name: 'A', metadata: '  ' }), {
      ok: true,
      body: { email: 'a@b.co', name: 'A', metadata: new Map() },
    })
  })

  it('keeps metadata keys in the order of the text, numbers included, both ways', () => {
    const text = '{"b":"1","a":"2","9":"x","1":"y","__proto__":"p","constructor":"c"}'
    const user = readJson(`{"id":"u","metadata":${text},"name":"N"}`) as { metadata: unknown }
    assert.ok(user.metadata instanceof Map)
    assert.deepEqual([...user.metadata.keys()], ['b', 'a', '9', '1', '__proto__', 'constructor'])
    assert.equal(writeJson(user), `{"id":"u","metadata":${text},"name":"N"}`)
    // A string that looks like a member name, escaped quotes and all, is left as it is.
    const tricky = String.raw`{"metadata":{"k":"a\\\":\"b"},"note":"\"x\": 1"}`
    assert.equal(writeJson(readJson(tricky)), tricky)
    const typed = formBody({ email: 'a@b.co', name: 'A', metadata: ' {"9": "x", "b": "1"} ' })
    assert.ok(typed.ok)
    assert.equal(
      writeJson(typed.body),
      '{"email":"a@b.co","name":"A","metadata":{"9":"x","b":"1"}}',
    )
    assert.equal(
      formValues({
        ...ada,
        metadata: new Map([
          ['z', '1'],
          ['2', '2'],
        ]),
      }).metadata,
      '{"z":"1","2":"2"}',
    )
  })

  it('refuses Metadata that is not a JSON object, at its field', () => {
    for (const text of ['{team: ops', '[1]', '"text"', 'null', '42']) {
      const body = formBody({ email: 'a@b.co', name: 'A', metadata: text })
      assert.equal(body.ok, false, text)
      if (!body.ok) {
        assert.equal(body.field, 'metadata')
        assert.match(body.message, /JSON object/)
      }
    }
  })
})

describe('the admin page: reading a problem', () => {
  it('puts each field error at the field its pointer names, the rest among the others', () => {
    const problem = readProblem(422, {
      type: 'urn:user-service:problem:validation_failed',
      title: 'Validation failed',
      status: 422,
      detail: 'The request body breaks 4 rules.',
      code: 'validation_failed',
      errors: [
        { pointer: '/email', code: 'invalid_format', message: 'must be an email address' },
        { pointer: '/name', code: 'required', message: 'is required' },
        { pointer: '/metadata/bad key', code: 'invalid_key', message: 'key is not allowed' },
        { pointer: '/metadata/other', code: 'too_long', message: 'is too long' },
        { pointer: '/status', code: 'read_only', message: 'is read-only' },
        { pointer: '', code: 'invalid_type', message: 'must be an object' },
      ],
    })
    assert.equal(problem.status, 422)
    assert.equal(problem.code, 'validation_failed')
    assert.equal(problem.title, 'Validation failed')
    assert.equal(problem.detail, 'The request body breaks 4 rules.')
    assert.deepEqual(
      [...problem.fields],
      [
        ['email', ['must be an email address']],
        ['name', ['is required']],
        ['metadata', ['key is not allowed', 'is too long']],
      ],
    )
    assert.deepEqual(problem.others, ['/status: is read-only', 'must be an object'])
  })

  it('reads any other problem as its title and detail, and a body that is none as its status', () => {
    const conflict = readProblem(409, {
      title: 'Conflict',
      detail: 'The email is taken.',
      code: 'duplicate_email',
    })
    assert.deepEqual(
      [conflict.title, conflict.detail, conflict.code, conflict.fields.size, conflict.others],
      ['Conflict', 'The email is taken.', 'duplicate_email', 0, []],
    )
    const bare = readProblem(502, undefined)
    assert.deepEqual([bare.title, bare.detail, bare.fields.size], ['Error 502', '', 0])
    const odd = readProblem(422, { errors: [null, 'x', { pointer: 7 }, { pointer: '/name' }] })
    assert.deepEqual([odd.fields.size, odd.others], [0, []])
  })
})
