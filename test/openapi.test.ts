import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { ServiceError } from '../src/domain/errors.js'
import { readIdempotencyKey } from '../src/http/idempotency-key.js'
import { ERROR_CODES } from '../src/http/problem.js'
import { createOpenApiDocument } from '../src/openapi/document.js'
import { ROUTES } from '../src/routes/route-list.js'
import { LIST_PARAMETERS, parseListQuery } from '../src/routes/users/list-query.js'
import { SERVICE_VERSION } from '../src/service.js'
import { MemoryStore } from '../src/store/memory-store.js'
import { createCursorCodec } from '../src/users/cursor.js'
import {
  INVISIBLE_ASTRAL_CLASS,
  INVISIBLE_BMP_CLASS,
  TRIMMED_CLASS,
} from '../src/users/text-rules.js'
import { FIELD_NAMES, USER_FIELDS } from '../src/users/user-fields.js'
import { validateCreate } from '../src/users/validate-user.js'
import { request } from './helpers/http.js'
import { allows } from './helpers/schema-values.js'
import { startService } from './helpers/service.js'

type Json = Record<string, unknown>

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function member(value: unknown, ...keys: string[]): unknown {
  let current = value
  for (const key of keys) {
    if (!isObject(current)) return undefined
    current = current[key]
  }
  return current
}

function objectAt(value: unknown, ...keys: string[]): Json {
  const found = member(value, ...keys)
  assert.ok(isObject(found), `expected an object at ${keys.join('.')}`)
  return found
}

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']

/** `METHOD path` for every operation of the document. */
function documentedOperations(doc: Json): string[] {
  const operations: string[] = []
  for (const [path, item] of Object.entries(objectAt(doc, 'paths'))) {
    assert.ok(isObject(item), path)
    for (const method of Object.keys(item).filter((key) => HTTP_METHODS.includes(key)))
      operations.push(`${method.toUpperCase()} ${path}`)
  }
  return operations.sort()
}

function operationOf(doc: Json, route: (typeof ROUTES)[number]): Json {
  return objectAt(doc, 'paths', route.path, route.method.toLowerCase())
}

/** A value, or what its `$ref` points at. */
function resolve(doc: Json, value: unknown): unknown {
  const target = member(value, '$ref')
  return typeof target === 'string' ? member(doc, ...target.slice(2).split('/')) : value
}

/** Every `$ref` anywhere in the value. */
function collectRefs(value: unknown, refs: string[] = []): string[] {
  if (Array.isArray(value)) for (const item of value) collectRefs(item, refs)
  else if (isObject(value)) {
    for (const [key, item] of Object.entries(value)) {
      if (key === '$ref' && typeof item === 'string') refs.push(item)
      else collectRefs(item, refs)
    }
  }
  return refs
}

const PROBLEM_REF = '#/components/schemas/Problem'
const doc = createOpenApiDocument({ basePath: '', version: SERVICE_VERSION })
const userRoutes = ROUTES.filter((route) => route.path.startsWith('/users'))

describe('GET /openapi.json', () => {
  it('returns the OpenAPI 3.1 document without a token', async (t) => {
    const s = await startService(t, { store: new MemoryStore() })
    const res = await request('GET', `${s.baseUrl}/openapi.json`)
    assert.equal(res.status, 200)
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/)
    assert.match(String(member(res.body, 'openapi')), /^3\.1\.\d+$/)
    assert.equal(member(res.body, 'info', 'version'), SERVICE_VERSION)
    assert.equal(typeof member(res.body, 'info', 'title'), 'string')
    assert.deepEqual(res.body, JSON.parse(JSON.stringify(doc)))
  })

  it('sits under the base path, names it as its server, and gives the root routes the server root', async (t) => {
    const s = await startService(t, { store: new MemoryStore(), basePath: '/v1' })
    const res = await request('GET', `${s.url}/v1/openapi.json`)
    assert.equal(res.status, 200)
    assert.deepEqual(member(res.body, 'servers'), [
      { url: '/v1', description: 'This service (its base path).' },
    ])
    const paths = objectAt(res.body, 'paths')
    assert.deepEqual(
      Object.keys(paths).sort(),
      [...new Set(ROUTES.map((route) => route.path))].sort(),
    )
    for (const route of ROUTES) {
      const servers = member(paths, route.path, 'servers')
      assert.deepEqual(
        servers,
        route.root
          ? [{ url: '/', description: 'The server root, outside the base path.' }]
          : undefined,
        route.path,
      )
    }
    assert.equal((await request('GET', `${s.url}/openapi.json`)).status, 404)
    assert.equal((await request('GET', `${s.url}/v1/healthz`)).status, 404)
  })
})

describe('the OpenAPI document and the route table', () => {
  it('describes exactly the routes of the table, with their methods, with or without a base path', () => {
    const expected = ROUTES.map((route) => `${route.method} ${route.path}`).sort()
    assert.deepEqual(documentedOperations(doc), expected)
    const prefixed = createOpenApiDocument({ basePath: '/v1', version: SERVICE_VERSION })
    assert.deepEqual(documentedOperations(prefixed), expected)
    assert.deepEqual(member(doc, 'servers'), [
      { url: '/', description: 'This service (its base path).' },
    ])
  })

  it('gives every operation a description and a tag, and the document a license and a contact', () => {
    const tags = (member(doc, 'tags') as Json[]).map((tag) => tag['name'])
    for (const route of ROUTES) {
      const operation = operationOf(doc, route)
      assert.ok(
        String(operation['description']).startsWith(`${route.summary}. `),
        route.operationId,
      )
      assert.ok(
        Array.isArray(operation['tags']) && operation['tags'].every((tag) => tags.includes(tag)),
        route.operationId,
      )
    }
    assert.deepEqual(member(doc, 'info', 'license'), { name: 'MIT', identifier: 'MIT' })
    assert.equal(typeof member(doc, 'info', 'contact', 'name'), 'string')
  })

  it('names each operation after the table and documents its path parameters', () => {
    for (const route of ROUTES) {
      const operation = operationOf(doc, route)
      assert.equal(operation['operationId'], route.operationId)
      assert.equal(operation['summary'], route.summary)
      const names = [...route.path.matchAll(/\{([^}]+)\}/g)].map((match) => match[1])
      const parameters = Array.isArray(operation['parameters']) ? operation['parameters'] : []
      const documented = parameters
        .filter((parameter) => member(parameter, 'in') === 'path')
        .map((parameter) => member(parameter, 'name'))
      assert.deepEqual(documented, names, `${route.method} ${route.path}`)
    }
  })

  it('documents the scope of every /users operation, and none for the probes', () => {
    assert.equal(member(doc, 'components', 'securitySchemes', 'bearer', 'scheme'), 'bearer')
    const scopes = Object.keys(objectAt(doc, 'components', 'securitySchemes', 'bearer', 'x-scopes'))
    assert.deepEqual(scopes.sort(), [
      'events:read',
      'users:admin',
      'users:read',
      'users:write',
      'webhooks:admin',
    ])
    for (const route of ROUTES) {
      const security = operationOf(doc, route)['security']
      if (route.scope === undefined) assert.deepEqual(security, [], route.operationId)
      else {
        assert.deepEqual(security, [{ bearer: [route.scope] }], route.operationId)
        assert.ok(scopes.includes(route.scope), route.operationId)
      }
    }
    assert.ok(userRoutes.length === 11 && userRoutes.every((route) => route.scope !== undefined))
  })

  it("names in each scope's x-scopes text every custom method that needs it", () => {
    const texts = objectAt(doc, 'components', 'securitySchemes', 'bearer', 'x-scopes')
    const verbs = ROUTES.flatMap((route) => {
      const verb = /:[A-Za-z]+$/.exec(route.path)?.[0]
      return verb === undefined || route.scope === undefined ? [] : [[route.scope, verb] as const]
    })
    assert.ok(verbs.length >= 6, String(verbs.length))
    for (const [scope, verb] of verbs)
      assert.ok(String(texts[scope]).includes(verb), `${scope} does not name ${verb}`)
  })

  it('documents the error answers of every /users operation as Problem', () => {
    for (const route of userRoutes) {
      const responses = objectAt(operationOf(doc, route), 'responses')
      const expected = [400, 401, 403, 408, 417, 429, 431, 500, 503]
      if (route.body !== 'none') expected.push(413, 415)
      // An import's bad lines are result lines of its 200: the import itself never answers 422.
      if (route.body !== 'none' && route.body !== 'stream') expected.push(422)
      if (route.path.includes('{')) expected.push(404)
      expected.push(412)
      if (
        [
          'createUser',
          'replaceUser',
          'updateUser',
          'activateUser',
          'suspendUser',
          'revokeTokens',
          'importUsers',
        ].includes(route.operationId)
      )
        expected.push(409)
      // A key in flight, a keyed body over its limit (a DELETE's too: its bytes are read for the
      // key), or a key sent with another request.
      if (route.idempotencyKey === true) expected.push(409, 413, 422)
      const documented = Object.keys(responses)
        .map(Number)
        .filter((status) => status >= 400)
      assert.deepEqual(
        documented,
        [...new Set(expected)].sort((a, b) => a - b),
        route.operationId,
      )
      for (const status of expected) {
        const response = resolve(doc, responses[String(status)])
        const schema = member(response, 'content', 'application/problem+json', 'schema', '$ref')
        assert.equal(
          schema,
          PROBLEM_REF,
          `${route.method} ${route.path} should document ${status} as Problem`,
        )
        assert.ok(
          isObject(member(response, 'headers', 'X-Request-Id')),
          `${route.operationId} ${status}`,
        )
      }
      assert.ok(isObject(member(resolve(doc, responses['401']), 'headers', 'WWW-Authenticate')))
      assert.ok(isObject(member(resolve(doc, responses['503']), 'headers', 'Retry-After')))
      const tooMany = resolve(doc, responses['429'])
      for (const header of ['Retry-After', 'RateLimit', 'RateLimit-Policy', 'X-RateLimit-Reset']) {
        assert.ok(
          isObject(member(tooMany, 'headers', header)),
          `${route.operationId} 429 ${header}`,
        )
      }
      for (const [status, answer] of Object.entries(responses)) {
        assert.ok(
          isObject(member(resolve(doc, answer), 'headers', 'RateLimit')),
          `${route.operationId} ${status} declares the rate-limit fields`,
        )
      }
      const accept = member(resolve(doc, responses['415']), 'headers', 'Accept-Patch')
      assert.equal(isObject(accept), route.method === 'PATCH', route.operationId)
    }
  })

  it('documents the success answers of every route with the statuses the route declares', () => {
    for (const route of ROUTES) {
      const responses = objectAt(operationOf(doc, route), 'responses')
      const declared = Object.keys(route.responses)
      assert.ok(
        declared.some((status) => /^2\d\d$/.test(status)),
        `${route.operationId} declares no success`,
      )
      for (const status of declared)
        assert.ok(isObject(responses[status]), `${route.method} ${route.path}: ${status}`)
    }
  })

  it('documents a request body with the media types of each route that takes one', () => {
    for (const route of ROUTES) {
      const body = operationOf(doc, route)['requestBody']
      if (route.body === 'none') {
        assert.equal(body, undefined, route.operationId)
        continue
      }
      assert.equal(
        member(body, 'required'),
        route.body === 'required' || route.body === 'stream',
        route.operationId,
      )
      assert.deepEqual(
        Object.keys(objectAt(body, 'content')).sort(),
        [...route.mediaTypes].sort(),
        route.operationId,
      )
    }
  })

  it('documents If-Match and If-None-Match on every route (RFC 9110 §13.2.1: every route evaluates both)', () => {
    for (const route of ROUTES) {
      const parameters = operationOf(doc, route)['parameters']
      const headers = (Array.isArray(parameters) ? parameters : [])
        .filter((parameter) => member(parameter, 'in') === 'header')
        .map((parameter) => member(parameter, 'name'))
      // The feed's stream resumes with Last-Event-ID (§10); no other header is a parameter.
      const own = route.operationId === 'listEvents' ? ['Last-Event-ID'] : []
      assert.deepEqual(headers, [...own, 'If-Match', 'If-None-Match'], route.operationId)
      const responses = objectAt(operationOf(doc, route), 'responses')
      // A read answers If-None-Match: * with 304, with an ETag or without one; any route can 412.
      assert.equal('304' in responses, route.method === 'GET', route.operationId)
      assert.ok('412' in responses, route.operationId)
    }
  })

  it('resolves every $ref inside the document', () => {
    const refs = collectRefs(doc)
    assert.ok(refs.length > 0)
    for (const ref of new Set(refs)) {
      assert.match(ref, /^#\//)
      assert.notEqual(member(doc, ...ref.slice(2).split('/')), undefined, `${ref} does not resolve`)
    }
  })
})

describe('the OpenAPI schemas and the user fields', () => {
  it('gives the User schema exactly the fields of USER_FIELDS, all required but tokensValidAfter', () => {
    const user = objectAt(doc, 'components', 'schemas', 'User')
    assert.deepEqual(Object.keys(objectAt(user, 'properties')), Object.keys(USER_FIELDS))
    // Absent until the user's first revocation.
    assert.deepEqual(
      user['required'],
      FIELD_NAMES.filter((name) => name !== 'tokensValidAfter'),
    )
    assert.equal(user['additionalProperties'], false)
  })

  it('marks output-only fields readOnly and writable fields not', () => {
    const properties = objectAt(doc, 'components', 'schemas', 'User', 'properties')
    for (const name of FIELD_NAMES) {
      const readOnly = member(properties, name, 'readOnly') === true
      assert.equal(readOnly, USER_FIELDS[name].access === 'output', name)
    }
  })

  it('lets UserCreate take only the writable fields and require the required ones', () => {
    const create = objectAt(doc, 'components', 'schemas', 'UserCreate')
    const writable = FIELD_NAMES.filter((name) => USER_FIELDS[name].access === 'writable')
    assert.deepEqual(Object.keys(objectAt(create, 'properties')), writable)
    assert.deepEqual(
      create['required'],
      writable.filter((name) => USER_FIELDS[name].required),
    )
  })

  it('names in info.description every code a 400 can carry', () => {
    const description = String(member(doc, 'info', 'description'))
    const codes = Object.entries(ERROR_CODES)
      .filter(([, entry]) => entry.status === 400)
      .map(([code]) => code)
    assert.ok(codes.length > 1, codes.join())
    for (const code of codes) assert.ok(description.includes(code), code)
  })

  it('lists every error code of ERROR_CODES in x-error-codes and in the Problem schema', () => {
    assert.deepEqual(doc['x-error-codes'], ERROR_CODES)
    assert.deepEqual(
      member(doc, 'components', 'schemas', 'Problem', 'properties', 'code', 'enum'),
      Object.keys(ERROR_CODES),
    )
  })
})

/** Every `pattern` string anywhere in the document. */
function collectPatterns(value: unknown): string[] {
  if (Array.isArray(value)) return value.flatMap(collectPatterns)
  if (!isObject(value)) return []
  return Object.entries(value).flatMap(([key, child]) =>
    key === 'pattern' && typeof child === 'string' ? [child] : collectPatterns(child),
  )
}

const ASTRAL_INVISIBLE = new RegExp(`^[${INVISIBLE_ASTRAL_CLASS}]$`, 'u')

describe('the OpenAPI field patterns and the validator', () => {
  const schemas = objectAt(doc, 'components', 'schemas')
  const patternOf = (field: string): RegExp =>
    new RegExp(String(member(schemas, 'User', 'properties', field, 'pattern')), 'u')
  const accepts = (field: 'email' | 'name', value: string): boolean => {
    try {
      validateCreate({ email: 'ada@example.com', name: 'Ada', [field]: value })
      return true
    } catch (error) {
      if (error instanceof ServiceError && error.code === 'validation_failed') return false
      throw error
    }
  }
  const emailSamples = [
    'ada@example.com',
    'v@io',
    'zoë@example.com',
    'ada@bücher.de',
    ' ada@example.com\\n',
    'a..b@example.com',
    '.a@b.co',
    'a@b.c',
    'a@b..c',
    'a@.b.c',
    'a@b.c.',
    '@b.co',
    'a@@b.co',
    'a@b@c.co',
    'a b@c.co',
    'a@b c.co',
    'a\\u0000@b.co',
    'a\\u0085@b.co',
    '\\u200B@b.co',
    'a@\\u200B.co',
    'a@b.\\u200B',
    'a\\u200B@b.co',
    '\\uD800@b.co',
    '😀@b.co',
    `${'l'.repeat(64)}@b.co`,
    `${'l'.repeat(65)}@b.co`,
    `a@${'d'.repeat(248)}.co`,
    `a@${'d'.repeat(249)}.co`,
    `   a@${'d'.repeat(248)}.co   `,
    `a@${'é'.repeat(248)}.co`,
    '\\u00A0a@b.co\\u3000',
    'a\\u00A0@b.co',
    '',
    ' ',
    'ab',
    'a"b@c.d',
    '\\uFEFFa@b.co',
    'a@b.co\\uFEFF',
    'a\\u180E@b.co',
    '\\u180E@b.co',
  ].map((sample) => JSON.parse(`"${sample.replace(/"/g, '\\"')}"`) as string)

  it('gives email a pattern that accepts exactly what the service accepts', () => {
    const pattern = patternOf('email')
    assert.equal(
      member(schemas, 'User', 'properties', 'email', 'format'),
      undefined,
      'format: email would refuse zoë@example.com',
    )
    for (const sample of emailSamples)
      assert.equal(pattern.test(sample), accepts('email', sample), JSON.stringify(sample))
    assert.ok(accepts('email', 'zoë@example.com') && !accepts('email', 'v@io'))
  })

  it('agrees with the validator on every code point in the local part and in a domain label', () => {
    const pattern = patternOf('email')
    for (let point = 0; point <= 0x10ffff; point += point < 0x3000 ? 1 : 97) {
      // The one documented difference: invisible characters above U+FFFF (see below).
      if (ASTRAL_INVISIBLE.test(String.fromCodePoint(point))) continue
      const char = String.fromCodePoint(point)
      for (const sample of [`${char}@b.co`, `a${char}@b.co`, `a@${char}.co`, `a@b.c${char}`]) {
        assert.equal(
          pattern.test(sample),
          accepts('email', sample),
          `${JSON.stringify(sample)} U+${point.toString(16)}`,
        )
      }
    }
  })

  it('gives name a pattern that accepts exactly what the service accepts', () => {
    const pattern = patternOf('name')
    const samples = [
      'Ada',
      ' Ada ',
      '\\tAda\\n',
      'A\\nda',
      'A\\u007Fda',
      'A\\u0085da',
      '',
      ' ',
      '\\u200B',
      '\\u200B\\u3000 ',
      'Ada\\u200B',
      'a'.repeat(200),
      'a'.repeat(201),
      ` ${'a'.repeat(200)} `,
      '😀'.repeat(200),
      '😀'.repeat(201),
      '\\uD800',
      'A\\uDC00',
      'A B',
      'A\\u00A0B',
    ].map((sample) => JSON.parse(`"${sample}"`) as string)
    for (const sample of samples)
      assert.equal(pattern.test(sample), accepts('name', sample), JSON.stringify(sample))
  })

  it('writes patterns that run without the u flag and without Unicode property classes', () => {
    const patterns = collectPatterns(doc)
    assert.ok(patterns.length >= 10, String(patterns.length))
    for (const pattern of patterns) {
      assert.doesNotThrow(() => new RegExp(pattern), pattern.slice(0, 80))
      assert.doesNotThrow(() => new RegExp(pattern, 'u'), pattern.slice(0, 80))
      assert.doesNotMatch(pattern, /\\[pP]\{|\\u\{/, pattern.slice(0, 80))
      // \s and \S differ between engines (Python's hold U+001C-U+001F and U+0085): only [\s\S].
      assert.doesNotMatch(pattern.replaceAll('[\\s\\S]', ''), /\\[sS]/, pattern.slice(0, 80))
    }
  })

  it('names the invisible characters as Unicode does', () => {
    const listed = new RegExp(`^[${INVISIBLE_BMP_CLASS}${INVISIBLE_ASTRAL_CLASS}]$`, 'u')
    const unicode = /^[\p{White_Space}\p{Default_Ignorable_Code_Point}]$/u
    const differ: string[] = []
    for (let point = 0; point <= 0x10ffff; point += 1) {
      const char = String.fromCodePoint(point)
      if (listed.test(char) !== unicode.test(char)) differ.push(point.toString(16))
    }
    assert.deepEqual(differ, [])
    const trimmed = new RegExp(`^[${TRIMMED_CLASS}]$`, 'u')
    for (let point = 0; point <= 0xffff; point += 1) {
      const char = String.fromCharCode(point)
      assert.equal(trimmed.test(char), char.trim() === '', point.toString(16))
    }
  })

  it('lets through a name or an email made only of invisible characters above U+FFFF, which the service refuses', () => {
    // No pattern that runs with and without the u flag and in Python can name a range of them.
    for (const char of ['\u{E0001}', '\u{1BCA0}', '\u{1D173}']) {
      assert.ok(patternOf('name').test(char) && !accepts('name', char))
      assert.ok(patternOf('email').test(`${char}@b.co`) && !accepts('email', `${char}@b.co`))
    }
  })

  it('gives email and name minLength and maxLength, met exactly by a trimmed value', () => {
    for (const field of ['email', 'name'] as const) {
      const schema = objectAt(schemas, 'User', 'properties', field)
      assert.equal(schema['minLength'], USER_FIELDS[field].minLength, field)
      assert.equal(schema['maxLength'], USER_FIELDS[field].maxLength, field)
    }
  })

  it('lets a PATCH send null for metadata and for a metadata value (RFC 7396)', () => {
    const metadata = objectAt(schemas, 'UserPatch', 'properties', 'metadata')
    assert.deepEqual(metadata['type'], ['object', 'null'])
    assert.deepEqual(member(metadata, 'additionalProperties', 'type'), ['string', 'null'])
    assert.equal(
      member(schemas, 'User', 'properties', 'metadata', 'additionalProperties', 'type'),
      'string',
    )
  })
})

describe('the OpenAPI UserPatch schema and PATCH /users/{id}', () => {
  const patch = objectAt(doc, 'components', 'schemas', 'UserPatch')
  const keys = (count: number, value: string | null): Json =>
    Object.fromEntries(Array.from({ length: count }, (_, n) => [`k${n}`, value]))

  it('allows a patch that removes 32 keys and adds one, which the service answers 200', async (t) => {
    const s = await startService(t, { store: new MemoryStore() })
    const user = await s.createUser({ metadata: keys(32, 'v') })
    const body = { metadata: { ...keys(32, null), n1: 'x' } }
    assert.ok(allows(doc, patch, body), 'UserPatch refuses 32 removals and one addition')
    const res = await s.call('PATCH', `/users/${user.id}`, { json: body })
    assert.equal(res.status, 200, res.text)
    assert.deepEqual(member(res.body, 'metadata'), { n1: 'x' })
    assert.deepEqual(member(await s.getUser(user.id), 'metadata'), { n1: 'x' })
  })

  it('leaves the bound to the merged metadata: 33 keys after the patch is 422 too_many_keys, and nothing changes', async (t) => {
    const s = await startService(t, { store: new MemoryStore() })
    const user = await s.createUser({ metadata: keys(32, 'v') })
    const body = { metadata: { n1: 'x' } }
    assert.ok(allows(doc, patch, body))
    const res = await s.call('PATCH', `/users/${user.id}`, { json: body })
    assert.equal(res.status, 422, res.text)
    assert.equal(member(res.body, 'code'), 'validation_failed')
    const errors = member(res.body, 'errors')
    assert.ok(Array.isArray(errors))
    assert.deepEqual(
      errors.map((error) => [member(error, 'pointer'), member(error, 'code')]),
      [['/metadata', 'too_many_keys']],
    )
    assert.deepEqual(await s.snapshot(), [user])
  })
})

describe('the OpenAPI list parameters and the list query parser', () => {
  const listRoute = ROUTES.find((route) => route.operationId === 'listUsers')
  assert.ok(listRoute !== undefined)
  const parameters = (operationOf(doc, listRoute)['parameters'] as Json[]).filter(
    (parameter) => parameter['in'] === 'query',
  )

  it('documents exactly the parameters the parser takes, and the blank values it refuses', () => {
    assert.deepEqual(
      parameters.map((parameter) => parameter['name']),
      [...LIST_PARAMETERS],
    )
    for (const name of ['cursor', 'email', 'q']) {
      const schema = objectAt(
        parameters.find((parameter) => parameter['name'] === name),
        'schema',
      )
      assert.equal(schema['minLength'], 1, name)
      assert.ok(!new RegExp(String(schema['pattern']), 'u').test(' \t'), name)
    }
    const status = new RegExp(
      String(
        member(
          parameters.find((parameter) => parameter['name'] === 'status'),
          'schema',
          'pattern',
        ),
      ),
      'u',
    )
    for (const value of [
      'active',
      'active, pending',
      ' suspended ,active',
      'active,',
      'Active',
      ',',
    ]) {
      const parsed = (() => {
        try {
          parseListQuery(
            `status=${encodeURIComponent(value)}`,
            createCursorCodec(Buffer.alloc(32, 1)),
          )
          return true
        } catch {
          return false
        }
      })()
      assert.equal(status.test(value), parsed, value)
    }
  })
})

describe('the OpenAPI headers and the answers', () => {
  const declared = (response: unknown): string[] =>
    Object.entries(objectAt(resolve(doc, response), 'headers'))
      .filter(([, header]) => member(resolve(doc, header), 'required') === true)
      .map(([name]) => name.toLowerCase())

  it('sends every required header it declares on 201, 200, 304, 412, 401 and the list Link', async (t) => {
    const s = await startService(t, { store: new MemoryStore() })
    const route = (id: string): (typeof ROUTES)[number] => {
      const found = ROUTES.find((candidate) => candidate.operationId === id)
      assert.ok(found !== undefined)
      return found
    }
    const responses = (id: string): Json => objectAt(operationOf(doc, route(id)), 'responses')
    const check = (res: { headers: Headers }, response: unknown, label: string): void => {
      for (const name of declared(response))
        assert.ok(res.headers.has(name), `${label} lacks ${name}`)
    }
    const created = await s.call('POST', '/users', {
      json: { email: 'ada@example.com', name: 'Ada' },
    })
    assert.equal(created.status, 201)
    check(created, responses('createUser')['201'], '201')
    const id = String(member(created.body, 'id'))
    const read = await s.call('GET', `/users/${id}`)
    check(read, responses('getUser')['200'], '200')
    const notModified = await s.call('GET', `/users/${id}`, {
      headers: { 'if-none-match': '"v1"' },
    })
    assert.equal(notModified.status, 304)
    check(notModified, responses('getUser')['304'], '304')
    const failed = await s.call('DELETE', `/users/${id}`, { headers: { 'if-match': '"v9"' } })
    assert.equal(failed.status, 412)
    check(failed, responses('deleteUser')['412'], '412')
    const anonymous = await request('GET', `${s.baseUrl}/users`)
    assert.equal(anonymous.status, 401)
    check(anonymous, responses('listUsers')['401'], '401')
    await s.call('POST', '/users', { json: { email: 'bob@example.com', name: 'Bob' } })
    const page = await s.call('GET', '/users?limit=1')
    assert.match(page.headers.get('link') ?? '', /^<\/users\?limit=1&cursor=[^>]+>; rel="next"$/)
    assert.ok(isObject(member(responses('listUsers'), '200', 'headers', 'Link')))
    assert.deepEqual(
      (await s.snapshot()).map((user) => user.email),
      ['ada@example.com', 'bob@example.com'],
    )
  })
})

describe('the OpenAPI rate-limit fields and the routes the limits count', () => {
  const FIELDS = [
    'RateLimit',
    'RateLimit-Policy',
    'X-RateLimit-Limit',
    'X-RateLimit-Remaining',
    'X-RateLimit-Used',
    'X-RateLimit-Reset',
  ]
  const declares = (answer: unknown): string[] => {
    const headers = member(resolve(doc, answer), 'headers')
    return isObject(headers) ? FIELDS.filter((name) => name in headers) : []
  }

  it('declares them on every answer of a counted route and on no answer of /healthz, /readyz or /metrics', () => {
    const roots = ROUTES.filter((route) => route.root)
    assert.deepEqual(roots.map((route) => route.path).sort(), ['/healthz', '/metrics', '/readyz'])
    for (const route of ROUTES) {
      for (const [status, answer] of Object.entries(objectAt(operationOf(doc, route), 'responses')))
        assert.deepEqual(
          declares(answer),
          route.root ? [] : FIELDS,
          `${route.operationId} ${status}`,
        )
    }
  })

  it('matches the answers: an error of a probe carries none of them with the limits on', async (t) => {
    const s = await startService(t, {
      store: new MemoryStore(),
      rateLimitAddress: { quota: 100, windowSeconds: 60 },
    })
    for (const route of ROUTES.filter((candidate) => candidate.root)) {
      const res = await request('GET', `${s.url}${route.path}`, { headers: { 'if-match': '"v1"' } })
      assert.equal(res.status, 412, route.path)
      for (const name of FIELDS) assert.equal(res.headers.get(name), null, `${route.path} ${name}`)
      assert.deepEqual(declares(objectAt(operationOf(doc, route), 'responses')['412']), [])
    }
    const counted = await request('GET', `${s.baseUrl}/openapi.json`, {
      headers: { 'if-match': '"v1"' },
    })
    assert.equal(counted.status, 412)
    assert.notEqual(counted.headers.get('ratelimit'), null)
  })
})

describe('the OpenAPI Vary header and the answers', () => {
  const vary = objectAt(doc, 'components', 'headers', 'Vary', 'schema')

  it('allows the Vary of a cacheable read with CORS off, and with CORS on (Authorization, Origin)', async (t) => {
    const plain = await startService(t, { store: new MemoryStore() })
    const cors = await startService(t, {
      store: new MemoryStore(),
      corsOrigins: ['https://app.example.test'],
    })
    for (const [s, origin] of [
      [plain, undefined],
      [cors, 'https://app.example.test'],
      [cors, 'https://other.example.test'],
      [cors, undefined],
    ] as const) {
      const user = await s.createUser()
      const headers: Record<string, string> = origin === undefined ? {} : { origin }
      for (const path of ['/users', `/users/${user.id}`]) {
        const res = await s.call('GET', path, { headers })
        assert.equal(res.status, 200)
        const sent = res.headers.get('vary')
        assert.ok(allows(doc, vary, sent), `${path} from ${origin ?? 'no origin'}: Vary: ${sent}`)
      }
    }
    assert.equal((await cors.call('GET', '/users')).headers.get('vary'), 'Authorization, Origin')
  })
})

describe('the OpenAPI parameters state what the parsers take', () => {
  const parameterSchema = (operationId: string, name: string): RegExp => {
    const route = ROUTES.find((candidate) => candidate.operationId === operationId)
    assert.ok(route !== undefined, operationId)
    const parameter = (operationOf(doc, route)['parameters'] as Json[]).find(
      (candidate) => candidate['name'] === name,
    )
    return new RegExp(String(member(parameter, 'schema', 'pattern')), 'u')
  }
  const id = (n: number): string => `0193a5f2-7c1e-7d3a-9b2f-${n.toString(16).padStart(12, '0')}`

  it('gives after and Last-Event-ID the event ids up to 7fffffffffffffff, and no more', () => {
    for (const name of ['after', 'Last-Event-ID']) {
      const pattern = parameterSchema('listEvents', name)
      for (const good of ['0000000000000000', '7fffffffffffffff', '00000000000a0b1c'])
        assert.ok(pattern.test(good), `${name} ${good}`)
      for (const bad of ['8000000000000000', 'ffffffffffffffff', '7FFFFFFFFFFFFFFF', '', 'zzz'])
        assert.ok(!pattern.test(bad), `${name} ${bad}`)
    }
  })

  it('gives ids 1 to 100 lower-case UUIDs, comma-separated', () => {
    const pattern = parameterSchema('listUsers', 'ids')
    const ids = (count: number): string =>
      Array.from({ length: count }, (_, index) => id(index)).join(',')
    for (const good of [ids(1), ids(100), ` ${id(1)} , ${id(2)}`]) assert.ok(pattern.test(good))
    for (const bad of [ids(101), id(1).toUpperCase(), `${id(1)},`, 'x', ' ', `${id(1)},,${id(2)}`])
      assert.ok(!pattern.test(bad), bad.slice(0, 60))
  })

  it('gives userId and the path id lower-case UUIDs only', () => {
    const userId = parameterSchema('listEvents', 'userId')
    const pathId = parameterSchema('getUser', 'id')
    for (const pattern of [userId, pathId]) {
      assert.ok(pattern.test(id(7)))
      assert.ok(!pattern.test(id(7).toUpperCase()) && !pattern.test(`${id(7)} `))
    }
  })

  it('refuses blank, NUL-holding values of cursor, email and q, as the parser does', () => {
    for (const name of ['cursor', 'email', 'q']) {
      const pattern = parameterSchema('listUsers', name)
      for (const bad of [' ', '\uFEFF', '\u3000\t', 'a\u0000'])
        assert.ok(!pattern.test(bad), `${name} ${JSON.stringify(bad)}`)
      assert.ok(pattern.test(' a '), name)
    }
  })
})

describe('the Idempotency-Key parameter', () => {
  const parameters = (doc['components'] as { parameters: Record<string, unknown> }).parameters
  const { schema } = parameters['IdempotencyKey'] as { schema: { pattern: string } }
  const pattern = new RegExp(schema.pattern)

  it('describes every key the service takes, parameters and escapes included', () => {
    for (const field of [
      '"8e03978e-40d5-43e8-bc93-6894a57f9324"',
      '"k";v=1',
      '"k"; a; b=?0',
      '"a \\"quoted\\" \\\\ key"',
      `"${'x'.repeat(255)}";note="${'y'.repeat(400)}"`,
    ]) {
      assert.equal(typeof readIdempotencyKey(field), 'string', field)
      assert.match(field, pattern)
    }
  })

  it('refuses what is not a String first', () => {
    for (const field of ['abc', '""', '?1', ':aGk=:', '"open', "'single'"]) {
      assert.doesNotMatch(field, pattern)
      assert.throws(() => readIdempotencyKey(field), field)
    }
  })

  it('refuses what the service refuses after a String: a longer key, a list, non-ASCII, text after it', () => {
    for (const field of [
      `"${'k'.repeat(256)}"`,
      `"${'\\"'.repeat(256)}"`,
      '"a", "b"',
      '"a","b"',
      '"a" "b"',
      '"zoë"',
      '"k";note="é"',
      '"k"x',
      '"k";',
      '"k" ;v=1',
      '"k";V=1',
      '"k";v=1234567890123456',
      '"k";v=1.2345',
      '"k";v=:a:',
      '"k";v=:aGk==:',
      '"k";v=%"%ff"',
      '"k";v=%"%C3%A9"',
      '"k";v=(1 2)',
    ]) {
      assert.doesNotMatch(field, pattern)
      assert.doesNotMatch(field, new RegExp(schema.pattern, 'u'))
      assert.throws(() => readIdempotencyKey(field), field.slice(0, 40))
    }
  })

  it('takes every parameter value the service takes', () => {
    for (const field of [
      `"${'\\"'.repeat(255)}"`,
      ' "k" ',
      '"k";a=-12.345;b=123456789012345;c=tok/en:x;d=:aGk=:;e=:aGk:;f=?1;g=@-1;h=%"%c3%a9 a";i',
      '"k";*x="";y=%"%f0%9f%98%80"',
    ]) {
      assert.equal(typeof readIdempotencyKey(field), 'string', field.slice(0, 40))
      assert.match(field, pattern)
    }
  })
})
