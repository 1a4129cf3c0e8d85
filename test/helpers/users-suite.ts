import assert from 'node:assert/strict'
import { readdir, readFile } from 'node:fs/promises'
import path from 'node:path'

import type { User } from '../../src/domain/user.js'
import { assertProblem, type TestResponse } from './http.js'
import type { TestService } from './service.js'

/** What a service holds: the users as the API lists them, and the user files on disk. */
export interface StoredState {
  readonly users: User[]
  readonly files: Record<string, string>
}

/** Every `DATA_DIR/users/*.json` file by name, with its text ({} when there is no such folder). */
export async function readUserFiles(dataDir: string): Promise<Record<string, string>> {
  const dir = path.join(dataDir, 'users')
  let names: string[]
  try {
    names = await readdir(dir)
  } catch (error) {
    if (error instanceof Error && 'code' in error && error.code === 'ENOENT') return {}
    throw error
  }
  const files: Record<string, string> = {}
  for (const name of names.filter((entry) => entry.endsWith('.json')).sort()) {
    files[name] = await readFile(path.join(dir, name), 'utf8')
  }
  return files
}

export async function captureState(s: TestService): Promise<StoredState> {
  return { users: await s.snapshot(), files: await readUserFiles(s.dataDir) }
}

/** Runs `action` and asserts that neither the API nor the disk shows any change after it. */
export async function assertUnchangedBy<T>(s: TestService, action: () => Promise<T>): Promise<T> {
  const before = await captureState(s)
  const result = await action()
  assert.deepEqual(await captureState(s), before, 'the stored data changed')
  return result
}

export interface ExpectedFieldError {
  pointer: string
  code?: string
}

/**
 * Asserts a 422 validation_failed whose errors[] has exactly one entry per expected pointer (in
 * any order), each with the expected code when given and a message.
 */
export function assertFieldErrors(
  res: TestResponse,
  expected: readonly ExpectedFieldError[],
): void {
  const problem = assertProblem(res, 422, 'validation_failed')
  const errors = problem.errors ?? []
  const pointers = errors.map((entry) => entry.pointer).sort()
  assert.deepEqual(pointers, expected.map((entry) => entry.pointer).sort(), res.text)
  for (const want of expected) {
    const entry = errors.find((candidate) => candidate.pointer === want.pointer)
    assert.ok(entry !== undefined, res.text)
    if (want.code !== undefined) assert.equal(entry.code, want.code, res.text)
    assert.equal(typeof entry.message, 'string')
    assert.ok(entry.message.length > 0, res.text)
  }
}

/** A clock for the `now` option that moves only when told to. */
export interface TestClock {
  readonly now: () => number
  advance(ms: number): void
}

/** Starts at `start` (default: the real time, so that tokens made now stay valid). */
export function createTestClock(start = Date.now()): TestClock {
  let current = start
  return {
    now: () => current,
    advance(ms) {
      current += ms
    },
  }
}

/** The Unix milliseconds in the first 48 bits of a UUIDv7. */
export function uuid7Millis(id: string): number {
  return Number.parseInt(id.replace(/-/g, '').slice(0, 12), 16)
}

/** Lower-case, version 7, RFC 9562 variant. */
export const UUID7_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

/** An address of exactly `total` characters whose local part is `local` times `fill`. */
export function makeEmail(local: number, total: number, fill = 'l'): string {
  const tld = '.com'
  let remaining = total - local - 1 - tld.length
  const labels: string[] = []
  // Labels of at most 63 characters: 62 plus a dot at a time, then the rest.
  while (remaining > 63) {
    labels.push('d'.repeat(62))
    remaining -= 63
  }
  labels.push('d'.repeat(remaining))
  const email = `${fill.repeat(local)}@${labels.join('.')}${tld}`
  assert.equal(email.length, total, 'makeEmail built the wrong length')
  return email
}

/** Follows a `Link: <…>; rel="next"` header: the target, or undefined when there is none. */
export function readNextLink(res: TestResponse): string | undefined {
  const link = res.headers.get('link')
  if (link === null) return undefined
  const match = /^<([^>]+)>;\s*rel="next"$/.exec(link)
  assert.ok(match?.[1] !== undefined, `not a rel="next" link: ${link}`)
  return match[1]
}
