import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { describe, it } from 'node:test'

import { serviceScript } from '../helpers/child-scripts.js'
import { startService, uniqueEmail } from '../helpers/service.js'

interface Run {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** Runs `user-service <args>` as a child process, with `input` on stdin. */
function runCli(
  args: readonly string[],
  input = '',
  env: Record<string, string> = {},
): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [serviceScript(), ...args], {
      cwd: new URL('../..', import.meta.url),
      env: { ...process.env, ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    })
    const out: Buffer[] = []
    const err: Buffer[] = []
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk))
    child.stderr.on('data', (chunk: Buffer) => err.push(chunk))
    child.on('error', reject)
    child.on('close', (code) => {
      resolve({
        code,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
      })
    })
    child.stdin.end(input)
  })
}

describe('user-service export and import', () => {
  it('exports to stdout and imports from stdin, with a count on stderr', async (t) => {
    const source = await startService(t)
    for (let i = 0; i < 25; i += 1) await source.createUser({ metadata: { b: '1', a: String(i) } })
    const exported = await runCli(['export', '--url', source.baseUrl, '--token', source.token])
    assert.equal(exported.code, 0, exported.stderr)
    assert.equal(exported.stdout.split('\n').filter((line) => line !== '').length, 25)
    assert.match(exported.stderr, /exported 25 users/)
    const target = await startService(t)
    const imported = await runCli(['import'], exported.stdout, {
      USER_SERVICE_URL: target.baseUrl,
      USER_SERVICE_TOKEN: target.token,
    })
    assert.equal(imported.code, 0, imported.stderr)
    assert.match(imported.stderr, /201: 25/)
    assert.deepEqual(await target.snapshot(), await source.snapshot())
  })

  it('exits 1 with one line when its reader goes away (export | head -1), not a stack trace', async (t) => {
    const source = await startService(t)
    const lines = Array.from({ length: 2000 }, (_, i) =>
      JSON.stringify({ email: uniqueEmail(`many${i}`), name: 'Many' }),
    )
    const seeded = await fetch(`${source.baseUrl}/users:import`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${source.token}`,
        'content-type': 'application/x-ndjson',
      },
      body: `${lines.join('\n')}\n`,
    })
    assert.equal(seeded.status, 200)
    assert.equal(
      (await seeded.text()).split('\n').filter((line) => line.includes('201')).length,
      2000,
    )
    const child = spawn(
      process.execPath,
      [serviceScript(), 'export', '--url', source.baseUrl, '--token', source.token],
      { cwd: new URL('../..', import.meta.url), stdio: ['ignore', 'pipe', 'pipe'] },
    )
    const err: Buffer[] = []
    child.stderr.on('data', (chunk: Buffer) => err.push(chunk))
    // The reader takes the first chunk and leaves, as `head -1` does.
    child.stdout.once('data', () => {
      child.stdout.destroy()
    })
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
    const stderr = Buffer.concat(err).toString('utf8')
    assert.equal(code, 1, stderr)
    assert.match(stderr, /user-service export: stdout was closed \(EPIPE\)/)
    assert.doesNotMatch(stderr, /^\s+at /m)
  })

  it('exits 3 when some lines were refused, and says how many by status', async (t) => {
    const target = await startService(t)
    const input = `${JSON.stringify({ email: uniqueEmail(), name: 'Good' })}\nnot json\n`
    const run = await runCli(['import', '--url', target.baseUrl, '--token', target.token], input)
    assert.equal(run.code, 3)
    assert.match(run.stderr, /201: 1, 400: 1/)
    assert.equal((await target.snapshot()).length, 1)
  })

  it('exits 1 with the problem when the service refuses, and 2 without a URL', async (t) => {
    const target = await startService(t)
    const refused = await runCli(['export', '--url', target.baseUrl, '--token', 'not-a-token'])
    assert.equal(refused.code, 1)
    assert.match(refused.stderr, /401 .*token/)
    const usage = await runCli(['export'], '', { USER_SERVICE_URL: '', USER_SERVICE_TOKEN: '' })
    assert.equal(usage.code, 2)
    assert.match(usage.stderr, /no service URL/)
  })
})
