import assert from 'node:assert/strict'
import { existsSync, readdirSync } from 'node:fs'
import type { TestContext } from 'node:test'
import { setTimeout as delay } from 'node:timers/promises'

import type { Child } from './child.js'
import { listLockFiles } from './data-files.js'
import { waitFor } from './ops.js'
import { compileShim, shimEnv } from './syscall-shim.js'

/** The environment of a start without a secret: its first start writes `DATA_DIR/.jwt-secret`. */
export const NO_SECRET = { JWT_SECRET: undefined, JWT_SECRETS: undefined, NODE_ENV: 'development' }
/** A token as the first-start message prints it. */
export const JWT = /eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+/

/**
 * Starts a service with `start` (given an environment in which every fsync takes a second, so
 * that the first-start secret's temp file is there, not yet renamed, for as long), sends it SIGTERM
 * while that temp file exists, and checks what the start must leave, whichever listener took the
 * signal: exit 0, no lock, no temp file, and a kept secret only if its token was printed.
 * Skips the test when the syscall shim cannot be built.
 */
export async function stopWhileSecretIsWritten(
  t: TestContext,
  dataDir: string,
  start: (env: Record<string, string | undefined>) => Child,
): Promise<void> {
  const shim = compileShim()
  if (shim.library === undefined) {
    t.skip(shim.skip)
    return
  }
  const child = start({ ...NO_SECRET, ...shimEnv(shim.library, { syncDelayMs: 1000 }) })
  const secretFiles = (): string[] =>
    (existsSync(dataDir) ? readdirSync(dataDir) : []).filter((name) => name.includes('jwt-secret'))
  await waitFor(
    "the secret's temp file",
    () => (secretFiles().some((name) => name.endsWith('.tmp')) ? true : undefined),
    60_000,
    5,
  )
  child.proc.kill('SIGTERM')
  // The signal must not be lost, whichever listener takes it: the start's or the service's.
  const ended = await Promise.race([child.exited, delay(90_000, 'still running', { ref: false })])
  assert.deepEqual(ended, { code: 0, signal: null }, child.stdout())
  assert.deepEqual(listLockFiles(dataDir), [])
  const left = secretFiles()
  assert.deepEqual(
    left.filter((name) => name !== '.jwt-secret'),
    [],
    'no temp file holds a secret',
  )
  const printed = JWT.test(child.stderr())
  assert.equal(left.includes('.jwt-secret'), printed, 'a kept secret has had its token printed')
}
