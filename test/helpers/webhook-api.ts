import assert from 'node:assert/strict'
import { readdir, readFile } from 'node:fs/promises'
import path from 'node:path'
import type { TestContext } from 'node:test'

import type { StoredWebhook, WebhookEndpoint } from '../../src/domain/webhook.js'
import type { UserServiceOptions } from '../../src/process/create-user-service.js'
import type { RequestOptions, TestResponse } from './http.js'
import { startService, type TestService } from './service.js'
import { makeToken } from './tokens.js'

/** A token with the webhooks scope alone. */
export const ADMIN = makeToken({ scope: 'webhooks:admin' })

export const UNKNOWN_ID = '0193b0c4-1d2e-7f00-8a1b-2c3d4e5f6a7b'

/** The shape of a secret: whsec_ and the padded base64 of 32 bytes. */
export const SECRET_SHAPE = /^whsec_[A-Za-z0-9+/]{43}=$/

export interface Endpoint extends WebhookEndpoint {}
export interface EndpointWithSecret extends WebhookEndpoint {
  readonly secret: string
}

import type { StoreCase } from './store-cases.js'

export { STORES, type StoreCase } from './store-cases.js'

/** The service with a webhook helper: every call under /webhooks with the webhooks token. */
export interface HookService extends TestService {
  hooks(method: string, target?: string, options?: RequestOptions): Promise<TestResponse>
  /** POST /webhooks with these fields (a public https url by default); asserts the 201. */
  createHook(fields?: Record<string, unknown>): Promise<EndpointWithSecret>
}

export async function startHooks(
  t: TestContext,
  store: StoreCase,
  options: Partial<UserServiceOptions> = {},
): Promise<HookService> {
  const s = await startService(t, { ...store.make(t), ...options })
  const hooks = (method: string, target = '', requestOptions: RequestOptions = {}) =>
    s.call(method, `/webhooks${target}`, { token: ADMIN, ...requestOptions })
  return Object.assign(s, {
    hooks,
    async createHook(fields: Record<string, unknown> = {}) {
      const res = await hooks('POST', '', {
        json: { url: 'https://hooks.example.com/users', ...fields },
      })
      assert.equal(res.status, 201, res.text)
      return res.json<EndpointWithSecret>()
    },
  })
}

/** What the store holds of every endpoint: secrets, cursors, what the API shows, the files. */
export interface HookState {
  readonly stored: StoredWebhook[]
  readonly cursors: (string | undefined)[]
  readonly listed: string
  readonly files: Record<string, string>
}

/** Every file of `DATA_DIR/webhooks` by name, with its text ({} when there is none). */
export async function readHookFiles(dataDir: string): Promise<Record<string, string>> {
  const dir = path.join(dataDir, 'webhooks')
  let names: string[]
  try {
    names = await readdir(dir)
  } catch (error) {
    if (error instanceof Error && 'code' in error && error.code === 'ENOENT') return {}
    throw error
  }
  const files: Record<string, string> = {}
  for (const name of names.sort()) files[name] = await readFile(path.join(dir, name), 'utf8')
  return files
}

export async function captureHooks(s: HookService): Promise<HookState> {
  const { webhooks } = s.service.store
  const stored = await webhooks.list()
  const cursors = await Promise.all(stored.map((hook) => webhooks.cursor(hook.endpoint.id)))
  const res = await s.hooks('GET')
  assert.equal(res.status, 200, res.text)
  return { stored, cursors, listed: res.text, files: await readHookFiles(s.dataDir) }
}

/** Runs `action` and asserts that the store and the API show no change after it. */
export async function assertHooksUnchangedBy<T>(
  s: HookService,
  action: () => Promise<T>,
): Promise<T> {
  const before = await captureHooks(s)
  const result = await action()
  assert.deepEqual(await captureHooks(s), before, 'the stored endpoints changed')
  return result
}

/** Asserts a 200 or 201 with one endpoint and its ETag; returns it. */
export function assertEndpoint(res: TestResponse, status = 200): Endpoint {
  assert.equal(res.status, status, res.text)
  const endpoint = res.json<Endpoint>()
  assert.equal(res.headers.get('etag'), `"v${endpoint.version}"`)
  return endpoint
}
