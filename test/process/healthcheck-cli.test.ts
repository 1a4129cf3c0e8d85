import assert from 'node:assert/strict'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Writable } from 'node:stream'
import { describe, it, type TestContext } from 'node:test'

import { runHealthcheck } from '../../src/process/healthcheck-cli.js'
import { spawnService } from '../helpers/child.js'
import { serviceScript } from '../helpers/child-scripts.js'
import { makeTempDir, startService } from '../helpers/service.js'

/** Runs the probe in this process; resolves with its exit code and what it wrote to stderr. */
async function probe(env: NodeJS.ProcessEnv): Promise<{ code: number; stderr: string }> {
  let stderr = ''
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      stderr += chunk.toString('utf8')
      done()
    },
  })
  const code = await runHealthcheck(env, sink)
  return { code, stderr }
}

const portOf = (url: string): string => new URL(url).port

/** A plain server that answers every request with `status`, closed when the test ends. */
async function answering(t: TestContext, status: number): Promise<string> {
  const server: Server = createServer((_req, res) => {
    res.writeHead(status).end()
  })
  await new Promise<void>((resolve) => {
    server.listen(0, '127.0.0.1', resolve)
  })
  t.after(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => {
          resolve()
        })
      }),
  )
  return String((server.address() as AddressInfo).port)
}

describe('user-service healthcheck', () => {
  it('exits 0 when the service on PORT answers 200 on /healthz, silently', async (t) => {
    const { url } = await startService(t)
    assert.deepEqual(await probe({ PORT: portOf(url), HOST: '127.0.0.1' }), { code: 0, stderr: '' })
  })

  it('probes a wildcard HOST (the images set 0.0.0.0) on loopback', async (t) => {
    const { url } = await startService(t)
    assert.deepEqual(await probe({ PORT: portOf(url), HOST: '0.0.0.0' }), { code: 0, stderr: '' })
  })

  it('looks for /healthz at the root, outside BASE_PATH, as the service serves it', async (t) => {
    const { url } = await startService(t, { basePath: '/v1' })
    assert.deepEqual(await probe({ PORT: portOf(url), HOST: '127.0.0.1', BASE_PATH: '/v1' }), {
      code: 0,
      stderr: '',
    })
  })

  it('exits 1 with one line when /healthz answers anything but 200', async (t) => {
    const port = await answering(t, 503)
    assert.deepEqual(await probe({ PORT: port, HOST: '127.0.0.1' }), {
      code: 1,
      stderr: `healthcheck: GET /healthz on 127.0.0.1:${port} answered 503\n`,
    })
  })

  it('exits 1 with one line when nothing listens', async (t) => {
    const port = await answering(t, 200)
    assert.equal((await probe({ PORT: port, HOST: '127.0.0.1' })).code, 0)
    // The port of a server that has just closed: nothing listens there now.
    const server = createServer()
    await new Promise<void>((resolve) => {
      server.listen(0, '127.0.0.1', resolve)
    })
    const closed = String((server.address() as AddressInfo).port)
    await new Promise<void>((resolve) => {
      server.close(() => {
        resolve()
      })
    })
    const result = await probe({ PORT: closed, HOST: '127.0.0.1' })
    assert.equal(result.code, 1)
    assert.match(
      result.stderr,
      new RegExp(
        `^healthcheck: GET /healthz on 127\\.0\\.0\\.1:${closed} failed: .*ECONNREFUSED.*\\n$`,
      ),
    )
  })

  it('exits 1 naming the variable when the configuration is bad, or when PORT=0 leaves no port to probe', async () => {
    assert.deepEqual(await probe({ PORT: 'abc' }), {
      code: 1,
      stderr: 'healthcheck: PORT must be a whole number, got "abc"\n',
    })
    assert.deepEqual(await probe({ PORT: '0' }), {
      code: 1,
      stderr: 'healthcheck: PORT=0 picks a free port at start; set PORT to probe it\n',
    })
  })

  it("is a subcommand of the one-file entry: its exit code is the probe's", {
    timeout: 60_000,
  }, async (t) => {
    const { url } = await startService(t)
    const dataDir = await makeTempDir(t)
    const run = async (port: string): Promise<{ code: number | null; stderr: string }> => {
      const child = spawnService({
        dataDir,
        args: [serviceScript(), 'healthcheck'],
        env: { PORT: port },
      })
      const { code } = await child.exited
      return { code, stderr: child.stderr() }
    }
    assert.deepEqual(await run(portOf(url)), { code: 0, stderr: '' })
    const refused = await run('abc')
    assert.equal(refused.code, 1)
    assert.match(refused.stderr, /^healthcheck: PORT must be a whole number/)
  })
})
