/**
 * `user-service/testing`: a real user service for other projects' test suites. It listens on a
 * free port of 127.0.0.1 with an in-memory store (or a temporary data directory) and a random
 * secret, and hands out tokens signed with that secret.
 */
import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'

import { SCOPES, type Scope } from './auth/authenticate.js'
import { createSingleKeySet } from './auth/keys.js'
import { signToken } from './auth/sign-token.js'
import { keepKeyOrder } from './domain/metadata.js'
import type { Metadata, User, UserStatus } from './domain/user.js'
import type { CorsOrigins } from './http/cors.js'
import type { Logger } from './log/logger.js'
import { createUserService } from './process/create-user-service.js'
import { MemoryStore } from './store/memory-store.js'

export type { Scope } from './auth/authenticate.js'
export type { User, UserStatus } from './domain/user.js'

export interface TestServiceOptions {
  /**
   * Keep users in files: `true` for a new temporary directory (removed by close()), or a path
   * (kept). Default: in memory.
   */
  dataDir?: boolean | string
  /** Origins a browser page may call the service from (see CORS_ORIGINS). */
  corsOrigins?: CorsOrigins
  /** Where the service logs; default: nowhere. */
  logger?: Logger
}

/** What seed() takes: any user fields; the rest is made up (a unique email, a name, pending). */
export interface SeedUser {
  email?: string
  name?: string
  metadata?: Metadata
  /** Reached through the service's own transitions (activate, then suspend). */
  status?: UserStatus
}

export interface TestService {
  /** `http://127.0.0.1:PORT`: /users, /healthz and the rest live under it. */
  readonly url: string
  /** A token for the service (valid for an hour); scopes default to all of them, sub to `test-user`. */
  token(scopes?: Scope | readonly Scope[], sub?: string): string
  /** Creates users through the API, in order, and returns them as stored. */
  seed(users: readonly SeedUser[]): Promise<User[]>
  /** Stops the service and removes its temporary data directory. Safe to call twice. */
  close(): Promise<void>
}

const TOKEN_TTL_S = 3600
let seedCounter = 0

/** Starts a service for a test: `const service = await startTestService(); t.after(service.close)`. */
export async function startTestService(options: TestServiceOptions = {}): Promise<TestService> {
  const { dataDir, temporary } = await resolveDataDir(options.dataDir)
  const keys = createSingleKeySet(`base64url:${randomBytes(32).toString('base64url')}`, 'secret')
  const service = createUserService({
    keys,
    ...(dataDir === undefined ? { store: new MemoryStore() } : { dataDir }),
    ...(options.logger === undefined ? {} : { logger: options.logger }),
    corsOrigins: options.corsOrigins,
  })
  let url: string
  try {
    url = (await service.listen(0, '127.0.0.1')).url
    await service.open()
  } catch (error) {
    await service.close().catch(() => undefined)
    if (temporary && dataDir !== undefined) await rm(dataDir, { recursive: true, force: true })
    throw error
  }
  const [key] = keys.keys
  if (key === undefined) throw new Error('startTestService: no signing key')

  const token = (scopes: Scope | readonly Scope[] = SCOPES, sub = 'test-user'): string => {
    const now = Math.floor(Date.now() / 1000)
    const scope = typeof scopes === 'string' ? scopes : scopes.join(' ')
    return signToken({ sub, scope, iat: now, exp: now + TOKEN_TTL_S }, { key })
  }
  const admin = token(SCOPES, 'test-service-seed')

  const call = async (method: string, target: string, body?: unknown): Promise<User> => {
    const res = await fetch(`${url}${target}`, {
      method,
      headers: {
        authorization: `Bearer ${admin}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    })
    const text = await res.text()
    if (!res.ok) throw new Error(`seed: ${method} ${target} answered ${res.status}: ${text}`)
    const user: unknown = JSON.parse(text)
    keepKeyOrder(text, user, ['metadata'])
    return user as User
  }

  let closing: Promise<void> | undefined
  return {
    url,
    token,
    async seed(users) {
      const created: User[] = []
      for (const fields of users) {
        seedCounter += 1
        const { status, ...rest } = fields
        let user = await call('POST', '/users', {
          email: `seed-${process.pid}-${seedCounter}-${randomBytes(3).toString('hex')}@example.com`,
          name: `Seed User ${seedCounter}`,
          ...rest,
        })
        if (status === 'active' || status === 'suspended')
          user = await call('POST', `/users/${user.id}:activate`)
        if (status === 'suspended') user = await call('POST', `/users/${user.id}:suspend`)
        created.push(user)
      }
      return created
    },
    close() {
      closing ??= (async () => {
        await service.close()
        if (temporary && dataDir !== undefined) await rm(dataDir, { recursive: true, force: true })
      })()
      return closing
    },
  }
}

async function resolveDataDir(
  option: boolean | string | undefined,
): Promise<{ dataDir: string | undefined; temporary: boolean }> {
  if (typeof option === 'string') return { dataDir: option, temporary: false }
  if (option !== true) return { dataDir: undefined, temporary: false }
  return { dataDir: await mkdtemp(path.join(tmpdir(), 'user-service-testing-')), temporary: true }
}
