import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { spawnService } from '../helpers/child.js'
import { serviceScript } from '../helpers/child-scripts.js'
import { makeTempDir } from '../helpers/service.js'

/** Runs `user-service ARGS` (the service's bundle) and waits for it to exit. */
async function runCommand(dataDir: string, args: readonly string[]) {
  const child = spawnService({ dataDir, args: [serviceScript(), ...args] })
  const { code } = await child.exited
  return { code, stdout: child.stdout(), stderr: child.stderr() }
}

describe('user-service COMMAND --help', () => {
  for (const [args, usage] of [
    [['token', '--help'], /^usage: user-service token --sub ID .*\n.*--ttl/s],
    [['token', '-h'], /^usage: user-service token --sub ID/],
    [['export', '--help'], /^usage: user-service export\|import \[--url URL\]/],
    [['import', '--url', 'http://127.0.0.1:1', '--help'], /^usage: user-service export\|import/],
    [['healthcheck', '--help'], /^usage: user-service healthcheck/],
    [['serve', '--help'], /^usage: user-service \[serve\]/],
    [['--help'], /^usage: user-service \[serve\].*\nusage: user-service token/s],
  ] as const) {
    it(`${args.join(' ')}: prints the usage on stdout and exits 0, doing nothing else`, async (t) => {
      const dataDir = await makeTempDir(t, 'cli-help-')
      const { code, stdout, stderr } = await runCommand(dataDir, args)
      assert.equal(stderr, '')
      assert.equal(code, 0)
      assert.match(stdout, usage)
    })
  }

  for (const name of ['constructor', 'toString', '__proto__']) {
    it(`${name} --help: an unknown command, not a name every object has (exit 2, the usage)`, async (t) => {
      const dataDir = await makeTempDir(t, 'cli-help-')
      const { code, stdout, stderr } = await runCommand(dataDir, [name, '--help'])
      assert.equal(code, 2, stderr)
      assert.equal(stdout, '')
      assert.match(stderr, new RegExp(`^user-service: unknown command "${name}"\nusage: `))
    })
  }

  for (const args of [
    ['serve', '--port', '3000'],
    ['healthcheck', '--port', '3000'],
  ] as const) {
    it(`${args.join(' ')}: refuses an argument the command does not take (exit 2, the usage)`, async (t) => {
      const dataDir = await makeTempDir(t, 'cli-help-')
      const child = spawnService({ dataDir, args: [serviceScript(), ...args] })
      // Without the refusal `serve` would serve on: it is stopped after a while.
      const timer = setTimeout(() => child.proc.kill('SIGKILL'), 20_000)
      t.after(() => {
        clearTimeout(timer)
        child.proc.kill('SIGKILL')
      })
      const { code } = await child.exited
      const stderr = child.stderr()
      assert.equal(code, 2, stderr)
      assert.equal(child.stdout(), '')
      assert.match(
        stderr,
        new RegExp(`^user-service ${args[0]}: unexpected argument "--port"\nusage: user-service `),
      )
    })
  }

  it('still refuses an unknown option with exit 1 and the reason', async (t) => {
    const dataDir = await makeTempDir(t, 'cli-help-')
    const { code, stdout, stderr } = await runCommand(dataDir, ['token', '--sub', 'a', '--bogus'])
    assert.equal(code, 1)
    assert.equal(stdout, '')
    assert.match(stderr, /^token: Unknown option '--bogus'/)
  })
})
