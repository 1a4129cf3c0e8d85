import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { EVENT_TYPES } from '../src/domain/event.js'
import { createOpenApiDocument } from '../src/openapi/document.js'
import { ROUTES } from '../src/routes/route-list.js'
import { SERVICE_VERSION } from '../src/service.js'
import { MemoryStore } from '../src/store/memory-store.js'
import { WEBHOOK_FIELD_NAMES, WEBHOOK_FIELDS } from '../src/webhooks/webhook-fields.js'
import { allows, isObject, type Json, resolve } from './helpers/schema-values.js'
import { type StoreCase, startHooks } from './helpers/webhook-api.js'

const doc = createOpenApiDocument({ basePath: '', version: SERVICE_VERSION }) as Json
const MEMORY: StoreCase = {
  name: 'memory',
  skip: false,
  make: () => ({ store: new MemoryStore() }),
}
const webhookRoutes = ROUTES.filter((route) => route.path.startsWith('/webhooks'))

function at(value: unknown, ...keys: string[]): unknown {
  let current = value
  for (const key of keys) current = isObject(current) ? current[key] : undefined
  return current
}

const schema = (name: string): Json => resolve(doc, { $ref: `#/components/schemas/${name}` })

describe('the OpenAPI document: webhooks', () => {
  it('lists the nine webhook routes, each needing webhooks:admin and tagged webhooks', () => {
    assert.deepEqual(
      webhookRoutes.map((route) => `${route.method} ${route.path}`),
      [
        'GET /webhooks',
        'POST /webhooks',
        'GET /webhooks/{id}',
        'PATCH /webhooks/{id}',
        'DELETE /webhooks/{id}',
        'POST /webhooks/{id}:rotateSecret',
        'GET /webhooks/{id}/deliveries',
        'GET /webhooks/{id}/cursor',
        'PUT /webhooks/{id}/cursor',
      ],
    )
    for (const route of webhookRoutes) {
      const operation = at(doc, 'paths', route.path, route.method.toLowerCase())
      assert.deepEqual(at(operation, 'security'), [{ bearer: ['webhooks:admin'] }])
      assert.deepEqual(at(operation, 'tags'), ['webhooks'])
      const parameters = at(operation, 'parameters')
      const path = Array.isArray(parameters)
        ? parameters.find((parameter) => at(parameter, 'in') === 'path')
        : undefined
      if (route.path.includes('{id}'))
        assert.match(String(at(path, 'description')), /^The webhook endpoint id/)
    }
    assert.equal(
      typeof at(doc, 'components', 'securitySchemes', 'bearer', 'x-scopes', 'webhooks:admin'),
      'string',
    )
  })

  it('documents the statuses each webhook route answers beyond the common ones', () => {
    const statuses = (operationId: string): string[] => {
      const route = webhookRoutes.find((candidate) => candidate.operationId === operationId)
      assert.ok(route, operationId)
      return Object.keys(
        at(doc, 'paths', route.path, route.method.toLowerCase(), 'responses') as Json,
      )
    }
    assert.ok(statuses('createWebhook').includes('409'))
    assert.ok(statuses('createWebhook').includes('201'))
    assert.ok(statuses('updateWebhook').includes('410'))
    assert.ok(statuses('updateWebhook').includes('412'))
    assert.ok(statuses('putWebhookCursor').includes('410'))
    assert.ok(statuses('getWebhook').includes('304'))
    assert.ok(statuses('deleteWebhook').includes('204'))
    assert.ok(statuses('rotateWebhookSecret').includes('412'))
    assert.equal(statuses('listWebhooks').includes('404'), false)
  })

  it('builds the endpoint schemas from WEBHOOK_FIELDS: all shown, output-only readOnly, secret only with the secret', () => {
    const webhook = schema('Webhook')
    assert.deepEqual(Object.keys(webhook['properties'] as Json), WEBHOOK_FIELD_NAMES)
    assert.deepEqual(webhook['required'], WEBHOOK_FIELD_NAMES)
    for (const name of WEBHOOK_FIELD_NAMES) {
      const readOnly = at(webhook, 'properties', name, 'readOnly') === true
      assert.equal(readOnly, WEBHOOK_FIELDS[name].access === 'output', name)
    }
    assert.deepEqual(schema('WebhookWithSecret')['required'], [...WEBHOOK_FIELD_NAMES, 'secret'])
    const create = schema('WebhookCreate')
    assert.deepEqual(Object.keys(create['properties'] as Json), [
      'url',
      'eventTypes',
      'description',
      'enabled',
    ])
    assert.deepEqual(create['required'], ['url'])
  })

  it('describes what is sent under the top-level webhooks, one entry per event type', () => {
    const webhooks = doc['webhooks'] as Json
    assert.deepEqual(Object.keys(webhooks), [...EVENT_TYPES])
    for (const type of EVENT_TYPES) {
      const post = at(webhooks, type, 'post')
      const body = resolve(doc, at(post, 'requestBody', 'content', 'application/json', 'schema'))
      assert.deepEqual(body['required'], ['type', 'timestamp', 'data'])
      assert.equal(at(body, 'properties', 'type', 'const'), type)
      const names = (at(post, 'parameters') as Json[]).map((parameter) => parameter['name'])
      assert.deepEqual(names, ['webhook-id', 'webhook-timestamp', 'webhook-signature'])
    }
  })
})

describe('webhook answers meet their documented schemas', () => {
  it('POST, GET, the list, a rotation, the cursor and the log', async (t) => {
    const s = await startHooks(t, MEMORY)
    const created = await s.createHook({ eventTypes: ['user.created'], description: 'CRM' })
    assert.ok(allows(doc, schema('WebhookWithSecret'), created))
    const shown = (await s.hooks('GET', `/${created.id}`)).body
    assert.ok(allows(doc, schema('Webhook'), shown))
    assert.equal(allows(doc, schema('Webhook'), created), false, 'no secret in a Webhook')
    const list = (await s.hooks('GET')).body
    assert.ok(allows(doc, schema('WebhookPage'), list))
    for (const item of at(list, 'items') as unknown[])
      assert.ok(allows(doc, schema('Webhook'), item))
    const rotated = (
      await s.hooks('POST', `/${created.id}:rotateSecret`, { json: { overlapSeconds: 5 } })
    ).body
    assert.ok(allows(doc, schema('WebhookWithSecret'), rotated))
    const cursor = (await s.hooks('GET', `/${created.id}/cursor`)).body
    assert.ok(allows(doc, schema('WebhookCursor'), cursor))
    const log = (await s.hooks('GET', `/${created.id}/deliveries`)).body
    assert.ok(allows(doc, schema('DeliveryPage'), log))
    const paused = (await s.hooks('PATCH', `/${created.id}`, { json: { enabled: false } })).body
    assert.ok(allows(doc, schema('Webhook'), paused))
  })
})
