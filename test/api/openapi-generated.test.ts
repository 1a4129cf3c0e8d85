import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { MemoryStore } from '../../src/store/memory-store.js'
import { request } from '../helpers/http.js'
import {
  allows,
  emailCandidates,
  idempotencyKeyCandidates,
  isObject,
  type Json,
  metadataCandidates,
  nameCandidates,
  resolve,
  stringCandidates,
} from '../helpers/schema-values.js'
import { startService, type TestService } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

/*
 * Requests built from the served OpenAPI document alone, as schemathesis builds them: for each
 * operation, each parameter in turn takes every candidate value its schema allows (the others
 * left out), and each writable body field in turn every candidate its schema allows (the others
 * valid). The service may refuse such a request for what no schema can say (an unknown id: 404, a
 * taken email: 409, a failed precondition: 412, a PATCH whose merged metadata passes 32 keys:
 * 422 too_many_keys) but never otherwise with 400 or 422: that would be a rule the document could
 * state and does not. Only `cursor` is not generated: it is the service's own
 * signed text, taken from a page as a stateful generator would; an `Idempotency-Key` also takes
 * keys at the edges of its grammar (idempotencyKeyCandidates). An `Idempotency-Key` belongs to
 * the token's subject: each request gets a subject of its own, so that a key one request kept is
 * not another request's reused key (a 422 that no schema can state). The corpus leaves out the
 * invisible characters above U+FFFF, the one difference docs/api.md owns to (no pattern that
 * every engine runs can name them; test/openapi.test.ts pins it).
 */

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'patch']
const SCOPES = 'users:read users:write users:admin events:read webhooks:admin'
const TOKEN = makeToken({ scope: SCOPES })

interface Operation {
  readonly method: string
  readonly path: string
  readonly op: Json
}

function operationsOf(doc: Json): Operation[] {
  const paths = isObject(doc['paths']) ? doc['paths'] : {}
  return Object.entries(paths).flatMap(([path, item]) =>
    HTTP_METHODS.flatMap((method) => {
      const op = isObject(item) ? item[method] : undefined
      return isObject(op) ? [{ method: method.toUpperCase(), path, op }] : []
    }),
  )
}

/** Candidates for one body field, by its name (the user's fields have rules a corpus must hit). */
function fieldCandidates(name: string, schema: Json): unknown[] {
  if (name === 'email') return emailCandidates()
  if (name === 'name') return nameCandidates()
  if (name === 'metadata') return metadataCandidates()
  return stringCandidates(schema)
}

/** A value a header can carry at all (fetch refuses others, as any client must). */
const sendableHeader = (value: string): boolean =>
  /^[\x21-\x7e\x80-\xff]([\t\x20-\x7e\x80-\xff]*[\x21-\x7e\x80-\xff])?$/.test(value)

interface Sent {
  readonly what: string
  readonly res: { readonly status: number; readonly text: string }
}

async function generate(svc: TestService, doc: Json, cursor: string): Promise<Sent[]> {
  const sent: Sent[] = []
  let hookId = ''
  const userPath = async (path: string): Promise<string> => {
    if (!path.includes('{id}')) return path
    if (path.startsWith('/webhooks/')) return path.replace('{id}', await webhookId())
    const user = await svc.createUser()
    return path.replace('{id}', user.id)
  }
  // One endpoint for the webhook routes, made again when a generated DELETE removed it.
  const webhookId = async (): Promise<string> => {
    if (
      hookId !== '' &&
      (await svc.call('GET', `/webhooks/${hookId}`, { token: TOKEN })).status === 200
    )
      return hookId
    const made = await svc.call('POST', '/webhooks', {
      token: TOKEN,
      json: { url: 'https://hooks.example.com/generated' },
    })
    assert.equal(made.status, 201, made.text)
    hookId = made.json<{ id: string }>().id
    return hookId
  }
  const send = async (
    operation: Operation,
    what: string,
    options: { query?: string; headers?: Record<string, string>; body?: string; type?: string },
  ): Promise<void> => {
    const path = await userPath(operation.path)
    const headers: Record<string, string> = { ...options.headers }
    if (options.type !== undefined) headers['content-type'] = options.type
    const url = `${svc.baseUrl}${path}${options.query === undefined ? '' : `?${options.query}`}`
    // fetch itself: an NDJSON answer is not one JSON text, and only the status and text matter.
    const answer = await fetch(url, {
      method: operation.method,
      headers: {
        ...headers,
        authorization: `Bearer ${makeToken({ scope: SCOPES, sub: `generated-${sent.length}` })}`,
      },
      ...(options.body === undefined ? {} : { body: options.body }),
    })
    const res = { status: answer.status, text: await answer.text() }
    sent.push({ what: `${operation.method} ${operation.path} ${what}`, res })
  }

  for (const operation of operationsOf(doc)) {
    const parameters = (Array.isArray(operation.op['parameters']) ? operation.op['parameters'] : [])
      .map((parameter) => resolve(doc, parameter))
      .filter((parameter) => parameter['in'] === 'query' || parameter['in'] === 'header')
    const body = resolve(doc, operation.op['requestBody'])
    const content = isObject(body['content']) ? body['content'] : {}
    // The required fields, valid, for the bodies that have any; the others start empty.
    const operationId = String(operation.op['operationId'])
    const needsUser = ['createUser', 'replaceUser'].includes(operationId)
    const baseBody = (): Json =>
      needsUser
        ? { email: `gen.${sent.length}@example.com`, name: 'Generated' }
        : (REQUIRED_BODIES[operationId] ?? {})
    const [firstType] = Object.keys(content)
    const plain = (): { body?: string; type?: string } =>
      firstType === undefined || firstType === 'application/x-ndjson'
        ? {}
        : { body: JSON.stringify(baseBody()), type: firstType }

    await send(operation, 'as documented, nothing optional', plain())

    for (const parameter of parameters) {
      const name = String(parameter['name'])
      const schema = resolve(doc, parameter['schema'])
      // The delivery log's cursor is made for one endpoint's page: this service shows none yet.
      if (name === 'cursor' && operationId === 'listWebhookDeliveries') continue
      const candidates: unknown[] =
        name === 'cursor'
          ? [cursor]
          : name === 'Idempotency-Key'
            ? [...stringCandidates(schema), ...idempotencyKeyCandidates()]
            : schema['type'] === 'integer'
              ? integerCandidates(schema)
              : stringCandidates(schema)
      for (const value of candidates) {
        if (!allows(doc, schema, value)) continue
        const text = String(value)
        if (parameter['in'] === 'header') {
          if (!sendableHeader(text)) continue
          await send(operation, `${name}: ${JSON.stringify(text).slice(0, 60)}`, {
            ...plain(),
            headers: { [name]: text },
          })
        } else {
          let query: string
          try {
            query = `${encodeURIComponent(name)}=${encodeURIComponent(text)}`
          } catch {
            continue // A lone surrogate cannot be sent as UTF-8.
          }
          await send(operation, `?${name}=${JSON.stringify(text).slice(0, 60)}`, {
            ...plain(),
            query,
          })
        }
      }
    }

    for (const [type, media] of Object.entries(content)) {
      if (!isObject(media)) continue
      const schema = resolve(doc, media['schema'])
      if (type === 'application/x-ndjson') {
        const line = JSON.stringify({ email: `line.${sent.length}@example.com`, name: 'Line' })
        for (const text of [...stringCandidates(schema), `${line}\n`]) {
          if (allows(doc, schema, text))
            await send(operation, `NDJSON ${JSON.stringify(text).slice(0, 40)}`, {
              body: text,
              type,
            })
        }
        continue
      }
      const properties = isObject(schema['properties']) ? schema['properties'] : {}
      for (const [field, raw] of Object.entries(properties)) {
        const fieldSchema = resolve(doc, raw)
        if (fieldSchema['readOnly'] === true) continue
        for (const value of fieldCandidates(field, fieldSchema)) {
          const candidate = { ...baseBody(), [field]: value }
          if (!allows(doc, schema, candidate)) continue
          await send(operation, `${type} ${field}=${JSON.stringify(value).slice(0, 60)}`, {
            body: JSON.stringify(candidate),
            type,
          })
        }
      }
    }
  }
  return sent
}

/** The required fields, valid, of the bodies of other operations than a user's create and replace. */
const REQUIRED_BODIES: Readonly<Record<string, Json>> = {
  createWebhook: { url: 'https://hooks.example.com/generated' },
  putWebhookCursor: { after: '0000000000000000' },
}

/**
 * A PATCH whose merged metadata would pass 32 keys: the bound is on the user after the merge (its
 * stored keys, less the patch's nulls, plus the patch's values), which no schema of the patch can
 * state; UserPatch says so in words. Only that one field error, on a PATCH, is let through.
 */
function isMergedMetadataTooLarge({ what, res }: Sent): boolean {
  if (!what.startsWith('PATCH /users/') || res.status !== 422) return false
  const errors = (JSON.parse(res.text) as { errors?: { pointer: string; code: string }[] }).errors
  return (
    errors?.length === 1 && errors[0]?.pointer === '/metadata' && errors[0].code === 'too_many_keys'
  )
}

function integerCandidates(schema: Json): number[] {
  const edges = [schema['minimum'], schema['maximum'], schema['default']].filter(
    (value): value is number => typeof value === 'number',
  )
  return [...new Set([0, 1, -1, ...edges.flatMap((n) => [n - 1, n, n + 1])])]
}

describe('requests generated from the served OpenAPI document', () => {
  it('refuses none that the document allows with 400 or 422', { timeout: 240_000 }, async (t) => {
    // Enough room for every endpoint a generated create makes.
    const svc = await startService(t, { store: new MemoryStore(), webhooksMax: 1000 })
    const served = await request('GET', `${svc.baseUrl}/openapi.json`)
    assert.equal(served.status, 200)
    assert.ok(isObject(served.body))
    const doc = served.body
    await svc.createUser()
    await svc.createUser()
    const page = await svc.call('GET', '/users?limit=1', { token: TOKEN })
    const cursor = String((page.body as Json)['nextCursor'])

    const sent = await generate(svc, doc, cursor)

    const statuses = new Map<number, number>()
    for (const { res } of sent) statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1)
    t.diagnostic(
      `${sent.length} requests: ${[...statuses].map(([s, n]) => `${n}× ${s}`).join(', ')}`,
    )
    const refused = sent
      .filter(({ res }) => res.status === 400 || res.status === 422)
      .filter((one) => !isMergedMetadataTooLarge(one))
      .map(({ what, res }) => `${what} → ${res.status} ${res.text.slice(0, 200)}`)
    assert.deepEqual(refused, [])
    // The generator reached every operation, and sent enough to mean something.
    const operations = new Set(sent.map(({ what }) => what.split(' ').slice(0, 2).join(' ')))
    assert.equal(operations.size, operationsOf(doc).length)
    assert.ok(sent.length > 300, String(sent.length))
    assert.ok(
      sent.some(({ res }) => res.status === 200) && sent.some(({ res }) => res.status === 201),
    )
  })
})
