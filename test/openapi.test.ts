import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { ERROR_CODES } from '../src/errors.js'
import { ROUTES } from '../src/http/route-table.js'
import { createOpenApiDocument } from '../src/openapi.js'
import { SERVICE_VERSION } from '../src/service.js'
import { MemoryStore } from '../src/store/memory-store.js'
import { FIELD_NAMES, USER_FIELDS } from '../src/users/user-fields.js'
import { request } from './helpers/http.js'
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

/** `METHOD path` for every operation of the document. */
function documentedOperations(doc: Json): string[] {
  const operations: string[] = []
  for (const [path, item] of Object.entries(objectAt(doc, 'paths'))) {
    assert.ok(isObject(item), path)
    for (const method of Object.keys(item)) operations.push(`${method.toUpperCase()} ${path}`)
  }
  return operations.sort()
}

function routePath(route: (typeof ROUTES)[number], basePath: string): string {
  return route.root ? route.path : `${basePath}${route.path}`
}

function operationOf(doc: Json, route: (typeof ROUTES)[number], basePath = ''): Json {
  return objectAt(doc, 'paths', routePath(route, basePath), route.method.toLowerCase())
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

  it('sits under the base path, and its /users paths carry the prefix while /healthz does not', async (t) => {
    const s = await startService(t, { store: new MemoryStore(), basePath: '/v1' })
    const res = await request('GET', `${s.url}/v1/openapi.json`)
    assert.equal(res.status, 200)
    const paths = Object.keys(objectAt(res.body, 'paths')).sort()
    assert.deepEqual(paths, [
      '/healthz', '/readyz', '/v1/openapi.json', '/v1/users', '/v1/users/{id}',
      '/v1/users/{id}:activate', '/v1/users/{id}:suspend',
    ])
    assert.equal((await request('GET', `${s.url}/openapi.json`)).status, 404)
  })
})

describe('the OpenAPI document and the route table', () => {
  it('describes exactly the routes of the table, with their methods', () => {
    const expected = ROUTES.map((route) => `${route.method} ${routePath(route, '')}`).sort()
    assert.deepEqual(documentedOperations(doc), expected)
  })

  it('describes exactly the routes of the table under a base path', () => {
    const prefixed = createOpenApiDocument({ basePath: '/v1', version: SERVICE_VERSION })
    const expected = ROUTES.map((route) => `${route.method} ${routePath(route, '/v1')}`).sort()
    assert.deepEqual(documentedOperations(prefixed), expected)
    assert.ok(expected.includes('GET /healthz') && expected.includes('GET /v1/users'))
  })

  it('names each operation after the table and documents its path parameters', () => {
    for (const route of ROUTES) {
      const operation = operationOf(doc, route)
      assert.equal(operation['operationId'], route.operationId)
      assert.equal(operation['summary'], route.summary)
      const names = [...route.path.matchAll(/\{([^}]+)\}/g)].map((match) => match[1])
      const parameters = Array.isArray(operation['parameters']) ? operation['parameters'] : []
      const documented = parameters.filter((parameter) => member(parameter, 'in') === 'path').map((parameter) => member(parameter, 'name'))
      assert.deepEqual(documented, names, `${route.method} ${route.path}`)
    }
  })

  it('documents the scope of every /users operation, and none for the probes', () => {
    assert.equal(member(doc, 'components', 'securitySchemes', 'bearer', 'scheme'), 'bearer')
    for (const route of ROUTES) {
      const security = operationOf(doc, route)['security']
      if (route.scope === undefined) assert.deepEqual(security, [], route.operationId)
      else assert.deepEqual(security, [{ bearer: [route.scope] }], route.operationId)
    }
    assert.ok(userRoutes.length === 8 && userRoutes.every((route) => route.scope !== undefined))
  })

  it('documents the error answers of every /users operation as Problem', () => {
    for (const route of userRoutes) {
      const responses = objectAt(operationOf(doc, route), 'responses')
      const expected = [401, 403, 500, 503]
      if (route.body !== 'none') expected.push(400, 413, 415, 422)
      if (route.path.includes('{')) expected.push(404)
      if (route.conditional && route.method !== 'GET') expected.push(412)
      for (const status of expected) {
        const schema = member(responses, String(status), 'content', 'application/problem+json', 'schema', '$ref')
        assert.equal(schema, PROBLEM_REF, `${route.method} ${route.path} should document ${status} as Problem`)
      }
      for (const [status, response] of Object.entries(responses)) {
        if (Number(status) >= 400) assert.equal(member(response, 'content', 'application/problem+json', 'schema', '$ref'), PROBLEM_REF)
      }
    }
  })

  it('documents the success answer of every route with the table status', () => {
    for (const route of ROUTES) {
      const responses = objectAt(operationOf(doc, route), 'responses')
      assert.ok(isObject(responses[String(route.status)]), `${route.method} ${route.path}: ${route.status}`)
    }
  })

  it('documents a request body with the media types of each route that takes one', () => {
    for (const route of ROUTES) {
      const body = operationOf(doc, route)['requestBody']
      if (route.body === 'none') {
        assert.equal(body, undefined, route.operationId)
        continue
      }
      assert.equal(member(body, 'required'), route.body === 'required', route.operationId)
      assert.deepEqual(Object.keys(objectAt(body, 'content')).sort(), [...route.mediaTypes].sort(), route.operationId)
    }
  })

  it('documents If-Match on conditional writes and If-None-Match on conditional reads', () => {
    for (const route of ROUTES) {
      const parameters = operationOf(doc, route)['parameters']
      const headers = (Array.isArray(parameters) ? parameters : [])
        .filter((parameter) => member(parameter, 'in') === 'header').map((parameter) => member(parameter, 'name'))
      const expected = !route.conditional ? [] : [route.method === 'GET' ? 'If-None-Match' : 'If-Match']
      assert.deepEqual(headers, expected, route.operationId)
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
  it('gives the User schema exactly the fields of USER_FIELDS, all required', () => {
    const user = objectAt(doc, 'components', 'schemas', 'User')
    assert.deepEqual(Object.keys(objectAt(user, 'properties')), Object.keys(USER_FIELDS))
    assert.deepEqual(user['required'], FIELD_NAMES)
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
    assert.deepEqual(create['required'], writable.filter((name) => USER_FIELDS[name].required))
  })

  it('lists every error code of ERROR_CODES in x-error-codes and in the Problem schema', () => {
    assert.deepEqual(doc['x-error-codes'], ERROR_CODES)
    assert.deepEqual(member(doc, 'components', 'schemas', 'Problem', 'properties', 'code', 'enum'), Object.keys(ERROR_CODES))
  })
})
