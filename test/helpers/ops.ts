import { request as httpRequest, type IncomingHttpHeaders } from 'node:http'

import type { ChangeContext } from '../../src/domain/change-context.js'
import type { User, UserRecord } from '../../src/domain/user.js'
import { MemoryStore } from '../../src/store/memory-store.js'
import type {
  ChangeUser,
  ListPage,
  ListQuery,
  SubjectRead,
  SubjectState,
} from '../../src/store/store.js'
import { sleep } from './child.js'
import { type RequestOptions, request, type TestResponse } from './http.js'

export interface HeldResponse {
  readonly status: number
  readonly headers: IncomingHttpHeaders
  readonly text: string
}

export interface HeldRequest {
  /** The answer once the server sends one; rejects when the connection is cut. */
  readonly response: Promise<HeldResponse>
  /** Sends the rest of the body. */
  finish(): void
  /** Cuts the connection from the client side. */
  abort(): void
}

export interface HoldOptions {
  method?: string
  /** The path under the server, e.g. `/users`. */
  path: string
  token?: string
  /** The whole body; only its first half is sent until finish(). */
  body: string
  /** More request headers, such as an `Idempotency-Key`. */
  headers?: Record<string, string>
}

/**
 * Starts a request on its own connection and sends its headers and only half of its body, so that
 * the server holds it in flight until finish() sends the rest.
 */
export function holdRequest(baseUrl: string, options: HoldOptions): HeldRequest {
  const url = new URL(options.path, baseUrl)
  const bytes = Buffer.from(options.body)
  const half = Math.floor(bytes.length / 2)
  const headers: Record<string, string | number> = {
    'content-type': 'application/json',
    'content-length': bytes.length,
    ...options.headers,
  }
  if (options.token !== undefined) headers['authorization'] = `Bearer ${options.token}`
  const req = httpRequest(url, { method: options.method ?? 'POST', headers, agent: false })
  const response = new Promise<HeldResponse>((resolve, reject) => {
    req.on('error', reject)
    req.on('response', (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => {
        text += chunk
      })
      res.on('error', reject)
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text })
      })
    })
  })
  // Marks the rejection as handled; callers that await the promise still see it.
  response.catch(() => undefined)
  req.write(bytes.subarray(0, half))
  return {
    response,
    finish() {
      req.end(bytes.subarray(half))
    },
    abort() {
      req.destroy()
    },
  }
}

/** A request that may fail to connect: the answer, or the error's text. */
export async function tryRequest(
  method: string,
  url: string,
  options: RequestOptions = {},
): Promise<TestResponse | { error: string }> {
  try {
    return await request(method, url, options)
  } catch (error) {
    return {
      error: error instanceof Error ? `${error.message} ${String(error.cause)}` : String(error),
    }
  }
}

/**
 * Polls `check` until it returns a value other than undefined, or throws after `timeoutMs`. The
 * default only bounds a wait (for a log line, a state a request leads to), as long as the webhook
 * receivers' own: on a loaded machine a child's work can take seconds. A test of how soon something
 * happens passes its own bound.
 */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 10_000,
  everyMs = 25,
): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await check()
    if (value !== undefined) return value
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await sleep(everyMs)
  }
}

/** Keeps the event loop of this process busy (no timers, no I/O) for `ms`. */
export function blockEventLoop(ms: number): void {
  const end = Date.now() + ms
  while (Date.now() < end) {
    // busy on purpose
  }
}

/** A memory store that counts its reads and writes (every method of the Store contract that reads or writes users). */
export class CountingStore extends MemoryStore {
  calls = 0

  override get(id: string): Promise<UserRecord | undefined> {
    this.calls += 1
    return super.get(id)
  }

  override getMany(ids: readonly string[]): Promise<UserRecord[]> {
    this.calls += 1
    return super.getMany(ids)
  }

  override isDeleted(id: string): Promise<boolean> {
    this.calls += 1
    return super.isDeleted(id)
  }

  override subjectOf(id: string): Promise<SubjectState> {
    this.calls += 1
    return super.subjectOf(id)
  }

  override getAs(id: string, subject: string): Promise<SubjectRead> {
    this.calls += 1
    return super.getAs(id, subject)
  }

  override list(query: ListQuery): Promise<ListPage> {
    this.calls += 1
    return super.list(query)
  }

  override create(user: User, check?: () => void, context?: ChangeContext): Promise<UserRecord> {
    this.calls += 1
    return super.create(user, check, context)
  }

  override update(id: string, change: ChangeUser, context?: ChangeContext): Promise<UserRecord> {
    this.calls += 1
    return super.update(id, change, context)
  }

  override delete(
    id: string,
    check?: (current: UserRecord) => void,
    context?: ChangeContext,
  ): Promise<void> {
    this.calls += 1
    return super.delete(id, check, context)
  }
}

/** A memory store whose open() waits until the test calls release(). */
export class GatedStore extends MemoryStore {
  readonly #gate: Promise<void>
  #release: () => void = () => undefined

  constructor() {
    super()
    this.#gate = new Promise<void>((resolve) => {
      this.#release = resolve
    })
  }

  release(): void {
    this.#release()
  }

  override open(): Promise<void> {
    return this.#gate
  }
}
