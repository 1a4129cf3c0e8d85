import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import type { TestContext } from 'node:test'

import type { User } from '../../src/domain/user.js'
import type { Logger } from '../../src/log/logger.js'
import {
  createUserService,
  type UserServiceOptions,
} from '../../src/process/create-user-service.js'
import type { UserService } from '../../src/service.js'
import { TEST_MAX_EVENT_LOOP_DELAY_MS } from './child.js'
import { type RequestOptions, request, type TestResponse, type UserPage } from './http.js'
import { makeToken, TEST_SECRET } from './tokens.js'

export interface TestService {
  readonly service: UserService
  /** http://127.0.0.1:PORT */
  readonly url: string
  /** url plus the base path: where /users lives. */
  readonly baseUrl: string
  readonly dataDir: string
  /** A token with every scope. */
  readonly token: string
  readonly logs: Record<string, unknown>[]
  /** A request under the base path (or an absolute URL) with the all-scopes token unless one is given. */
  call(method: string, target: string, options?: RequestOptions): Promise<TestResponse>
  createUser(fields?: Record<string, unknown>): Promise<User>
  getUser(id: string): Promise<User>
  /** Every user, following nextCursor, sorted by id: for before/after comparisons. */
  snapshot(): Promise<User[]>
}

/** A fresh temporary directory, removed when the test ends. */
export async function makeTempDir(t: TestContext, prefix = 'user-service-test-'): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), prefix))
  // Tried again while a store that is still open (closed by a later hook) adds a file meanwhile.
  t.after(() => rm(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 20 }))
  return dir
}

/** A logger that keeps every line, for tests that read the logs. */
export function createMemoryLogger(lines: Record<string, unknown>[]): Logger {
  const keep =
    (level: string) =>
    (msg: string, fields?: Readonly<Record<string, unknown>>): void => {
      lines.push({ level, msg, ...fields })
    }
  return { debug: keep('debug'), info: keep('info'), warn: keep('warn'), error: keep('error') }
}

let emailCounter = 0
export function uniqueEmail(tag = 'user'): string {
  emailCounter += 1
  return `${tag}.${process.pid}.${emailCounter}.${Math.random().toString(36).slice(2, 8)}@example.com`
}

/**
 * Starts the real service on port 0 with a temporary data directory (or the options' store) and
 * waits until it is ready; it is closed when the test ends.
 */
export async function startService(
  t: TestContext,
  options: Partial<UserServiceOptions> = {},
): Promise<TestService> {
  const dataDir = options.dataDir ?? path.join(await makeTempDir(t), 'data')
  const logs: Record<string, unknown>[] = []
  const service = createUserService({
    secret: TEST_SECRET,
    logger: createMemoryLogger(logs),
    // A busy CI machine can stall the test process's event loop past the 1 s default, and the
    // service would answer 503 overloaded: only the tests of that refusal (which set it) want it.
    maxEventLoopDelayMs: Number(TEST_MAX_EVENT_LOOP_DELAY_MS),
    ...(options.store === undefined ? { dataDir } : {}),
    ...options,
  })
  const { url } = await service.listen(0, '127.0.0.1')
  t.after(() => service.close())
  await service.open()
  const baseUrl = `${url}${options.basePath ?? ''}`
  const token = makeToken()
  const call = (
    method: string,
    target: string,
    requestOptions: RequestOptions = {},
  ): Promise<TestResponse> =>
    request(method, /^https?:/.test(target) ? target : `${baseUrl}${target}`, {
      token,
      ...requestOptions,
    })
  const getUser = async (id: string): Promise<User> => {
    const res = await call('GET', `/users/${id}`)
    if (res.status !== 200) throw new Error(`GET /users/${id}: ${res.status} ${res.text}`)
    return res.json<User>()
  }
  return {
    service,
    url,
    baseUrl,
    dataDir,
    token,
    logs,
    call,
    getUser,
    async createUser(fields = {}) {
      const res = await call('POST', '/users', {
        json: { email: uniqueEmail(), name: 'Test User', ...fields },
      })
      if (res.status !== 201) throw new Error(`POST /users: ${res.status} ${res.text}`)
      return res.json<User>()
    },
    async snapshot() {
      const users: User[] = []
      let cursor: string | null = null
      do {
        const query: string = cursor === null ? '?limit=100' : `?limit=100&cursor=${cursor}`
        const res = await call('GET', `/users${query}`)
        if (res.status !== 200) throw new Error(`GET /users: ${res.status} ${res.text}`)
        const page = res.json<UserPage>()
        users.push(...page.items)
        cursor = page.nextCursor
      } while (cursor !== null)
      return users.sort((a, b) => (a.id < b.id ? -1 : 1))
    },
  }
}
