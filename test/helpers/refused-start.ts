import assert from 'node:assert/strict'
import type { TestContext } from 'node:test'

import { spawnService } from './child.js'

/** Starts the service on `dataDir` and waits for it to give up: the error its log says. */
export async function refusedStart(t: TestContext, dataDir: string): Promise<string> {
  const child = spawnService({ dataDir })
  t.after(() => {
    child.proc.kill('SIGKILL')
  })
  // A start that is not refused is stopped, and fails the test below.
  const timer = setTimeout(() => child.proc.kill('SIGKILL'), 20_000)
  const exit = await child.exited
  clearTimeout(timer)
  assert.equal(exit.code, 1, `${child.stdout()}\n${child.stderr()}`)
  const line = child
    .stdout()
    .split('\n')
    .find((text) => text.includes('"msg":"could not load the store"'))
  assert.ok(line !== undefined, child.stdout())
  const error: unknown = JSON.parse(line).error
  assert.equal(typeof error, 'string')
  return String(error)
}
