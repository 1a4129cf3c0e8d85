/**
 * `npm run test:container` (not part of `npm test`): builds both images of the Dockerfile with the
 * engine it finds (podman, else docker) and runs each as a user would, with no configuration, a
 * named volume, a read-only root, the engine's health check and `stop`. Every container, volume
 * and image it makes is named after this process and removed by name at the end.
 */
import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import path from 'node:path'
import { performance } from 'node:perf_hooks'
import { after, describe, it, type TestContext } from 'node:test'

import type { User } from '../../src/domain/user.js'
import { checkAdminPageServed } from '../helpers/admin-page.js'
import { PROJECT_ROOT } from '../helpers/child.js'
import { request } from '../helpers/http.js'
import { waitFor } from '../helpers/ops.js'
import { makeTempDir, uniqueEmail } from '../helpers/service.js'
import {
  baseImages,
  cleanTree,
  type Engine,
  findEngine,
  TARGETS,
  type Target,
  waitForHealthz,
} from './engine.js'

const engine = await findEngine()
const pkg = JSON.parse(await readFile(path.join(PROJECT_ROOT, 'package.json'), 'utf8')) as {
  version: string
  license: string
}
/** The image's numeric user (uid and gid 1000, `node` in the Node image). */
const UID = 1000
const FIRST_START =
  /No JWT_SECRET was set, so a new random secret was written to \/data\/\.jwt-secret/
const TOKEN_LINE = /^ {2}(eyJ[\w-]+\.[\w-]+\.[\w-]+)$/m
/** What must never be in an image's history, environment or labels. */
const SECRETS = /JWT_SECRET|eyJ[\w-]{10,}\.|npmrc|_authToken|NPM_TOKEN/i
/** Dev dependencies (and the build's own tools): none of them runs the service. */
const DEV_DEPENDENCY =
  /(^|\/)node_modules\/(typescript|tsx|c8|esbuild|postject|@stryker-mutator|@types)(\/|$)/

describe('container images', {
  skip: typeof engine === 'string' ? `${engine}: skipped` : false,
}, () => {
  if (typeof engine === 'string') return
  for (const target of TARGETS) describeImage(engine, target)
})

function describeImage(engine: Engine, target: Target): void {
  const image = `user-service-test-${target.name}-${process.pid}`
  const volume = `${image}-data`
  const first = `${image}-first`
  const second = `${image}-second`
  const bad = `${image}-bad`
  const probe = `${image}-probe`
  const files = `${image}-files`
  let built = false
  let base = ''
  // What the first container made, for the later tests.
  let adminToken = ''
  let user: User | undefined

  after(() =>
    engine.remove({
      containers: [first, second, bad, probe, files],
      volumes: [volume],
      images: [image],
    }),
  )

  /** `run -d` with no configuration: a published port, the volume, a read-only root. */
  async function start(name: string): Promise<{ url: string; readyMs: number }> {
    const since = performance.now()
    const url = await engine.runDetached(name, volume, image)
    const readyMs = await waitForHealthz(url, since, 10_000).catch(async (error: unknown) => {
      throw new Error(`${String(error)}\n${await engine.logs(name)}`)
    })
    await usersLoaded(url)
    return { url, readyMs }
  }

  /** /healthz answers while the users load; /users waits for /readyz. */
  async function usersLoaded(url: string): Promise<void> {
    await waitFor(
      '/readyz 200',
      async () => {
        const res = await request('GET', `${url}/readyz`).catch(() => undefined)
        return res?.status === 200 ? true : undefined
      },
      10_000,
      50,
    )
  }

  /** The names in the data volume, seen from a throwaway container of the base image. */
  async function volumeEntries(): Promise<string[]> {
    const out = await engine.must([
      'run',
      '--rm',
      '--pull=never',
      '--name',
      probe,
      '-v',
      `${volume}:/data`,
      '--user',
      '0',
      '--entrypoint',
      'ls',
      base,
      '-A',
      '/data',
    ])
    return out.split('\n').filter((line) => line !== '')
  }

  /** `stop` (SIGTERM): how long it took, the exit code, and the volume afterwards. */
  async function stop(name: string): Promise<{ ms: number; code: string; entries: string[] }> {
    const since = performance.now()
    await engine.must(['stop', name])
    const ms = performance.now() - since
    return {
      ms,
      code: await engine.inspect(name, '{{.State.ExitCode}}'),
      entries: await volumeEntries(),
    }
  }

  function needsImage(t: TestContext): boolean {
    if (!built) t.skip('the image did not build')
    return built
  }

  describe(`${target.name} (${target.target === undefined ? 'the default target' : `--target ${target.target}`})`, () => {
    it('builds from a clean tree with --pull=never once the base images are here', {
      timeout: 900_000,
    }, async (t) => {
      const bases = await baseImages()
      base = bases[0] ?? ''
      assert.ok(base !== '', 'the Dockerfile names a base image')
      for (const name of bases) {
        if ((await engine.run(['image', 'inspect', name])).code === 0) continue
        const pulled = await engine.run(['pull', name], 600_000)
        assert.equal(
          pulled.code,
          0,
          `the base image ${name} is not here and ${engine.name} pull failed (on a machine that reaches no registry, build a local stand-in first; CI: ../shared/tools/node-base-image.sh):\n${pulled.stderr}`,
        )
      }
      const context = await cleanTree(await makeTempDir(t, 'user-service-context-'))
      const build = await engine.run(engine.buildArgs(image, target, context), 900_000)
      assert.equal(build.code, 0, `${engine.name} build failed:\n${build.stderr.slice(-4000)}`)
      built = true
      const size = Number(await engine.inspect(image, '{{.Size}}'))
      t.diagnostic(
        `${target.name} image: ${(size / 1e6).toFixed(1)} MB (${size} bytes, ${engine.name})`,
      )
      assert.ok(size > 0)
    })

    it('is labelled, runs as a numeric non-root user and carries a health check', async (t) => {
      if (!needsImage(t)) return
      const labels = JSON.parse(await engine.inspect(image, '{{json .Config.Labels}}')) as Record<
        string,
        string
      >
      assert.equal(labels['org.opencontainers.image.version'], pkg.version)
      assert.equal(labels['org.opencontainers.image.licenses'], pkg.license)
      assert.ok('org.opencontainers.image.source' in labels)
      assert.equal(await engine.inspect(image, '{{.Config.User}}'), `${UID}:${UID}`)
      const health = await engine.healthcheck(image)
      assert.match(health, /healthcheck/, 'the health check runs the healthcheck subcommand')
      const env = await engine.inspect(image, '{{json .Config.Env}}')
      assert.doesNotMatch(env, /NODE_ENV/)
      assert.match(env, /DATA_DIR=\/data/)
    })

    it('holds no secret, no .npmrc and no dev dependency', { timeout: 120_000 }, async (t) => {
      if (!needsImage(t)) return
      const history = await engine.must([
        'history',
        '--no-trunc',
        '--format',
        '{{.CreatedBy}}',
        image,
      ])
      assert.ok(history.length > 0)
      assert.doesNotMatch(history, SECRETS)
      assert.doesNotMatch(
        await engine.inspect(image, '{{json .Config.Env}} {{json .Config.Labels}}'),
        SECRETS,
      )
      const paths = await engine.listFiles(
        image,
        files,
        await makeTempDir(t, 'user-service-export-'),
      )
      assert.ok(paths.length > 0)
      assert.deepEqual(
        paths.filter((file) => /(^|\/)(\.npmrc|npmrc|\.jwt-secret)$/.test(file)),
        [],
      )
      const devFiles = paths.filter((file) => DEV_DEPENDENCY.test(file))
      assert.equal(
        devFiles.length,
        0,
        `dev dependencies in the image: ${devFiles.slice(0, 5).join(' ')} …`,
      )
      if (target.target === 'binary') {
        // No Node, npm or shell: the executable, the libraries it links, passwd and group.
        assert.deepEqual(
          paths.filter((file) => /(^|\/)(sh|bash|dash|busybox|node|npm|npx)$/.test(file)),
          [],
        )
        assert.ok(paths.includes('usr/local/bin/user-service'), paths.join('\n'))
        const regular = paths.filter((file) => !file.endsWith('/'))
        t.diagnostic(`binary image files: ${regular.join(' ')}`)
        assert.ok(regular.length < 20, regular.join('\n'))
      } else {
        assert.deepEqual(
          paths.filter((file) => file.startsWith('app/') && file !== 'app/'),
          ['app/user-service.mjs'],
        )
      }
    })

    it('starts with no configuration as a non-root user, answers /healthz within 10 s and prints the admin token once', {
      timeout: 60_000,
    }, async (t) => {
      if (!needsImage(t)) return
      await engine.run(['volume', 'rm', '-f', volume])
      const { url, readyMs } = await start(first)
      t.diagnostic(`${target.name}: /healthz 200 ${readyMs.toFixed(0)} ms after run`)
      assert.ok(readyMs < 10_000)
      // The admin page comes from inside the image, with its CSP.
      await checkAdminPageServed(url)

      // The kernel's view: the service's uid on the host, mapped back into the container's user namespace.
      const pid = await engine.inspect(first, '{{.State.Pid}}')
      const status = await readFile(`/proc/${pid}/status`, 'utf8')
      const hostUid = Number(/^Uid:\s+(\d+)/m.exec(status)?.[1])
      const map = (await readFile(`/proc/${pid}/uid_map`, 'utf8'))
        .trim()
        .split('\n')
        .map((line) => line.trim().split(/\s+/).map(Number))
      const uid = map
        .map(([inside = 0, outside = 0, count = 0]) =>
          hostUid >= outside && hostUid < outside + count ? inside + hostUid - outside : undefined,
        )
        .find((found) => found !== undefined)
      assert.equal(uid, UID)

      const logs = await waitFor(
        'the first-start message',
        async () => {
          const text = await engine.logs(first)
          return TOKEN_LINE.test(text) ? text : undefined
        },
        10_000,
        100,
      )
      assert.match(logs, FIRST_START)
      assert.match(logs, /"msg":"listening","url":"http:\/\/0\.0\.0\.0:8080"/)
      // The message names what a user can run: loopback, and the image's own token command.
      assert.match(
        logs,
        /^ {2}curl -H "Authorization: Bearer [\w.-]+" http:\/\/127\.0\.0\.1:8080\/users$/m,
      )
      // DATA_DIR is /data: data in the binary image's working directory (/), not in /app, so
      // the default image's command names it.
      const command =
        target.name === 'binary'
          ? '/usr/local/bin/user-service token'
          : 'node user-service.mjs token --data-dir /data'
      assert.ok(
        logs.includes(`\n  ${command} --sub feed-reader --scope events:read\n`),
        `the token command of the ${target.name} image:\n${logs}`,
      )
      assert.doesNotMatch(logs, /npm run/)
      adminToken = TOKEN_LINE.exec(logs)?.[1] ?? ''
      assert.equal(await engine.inspect(first, '{{.HostConfig.ReadonlyRootfs}}'), 'true')

      // A write through the API on the read-only root: only the volume takes it.
      const email = uniqueEmail('container')
      const created = await request('POST', `${url}/users`, {
        token: adminToken,
        json: { email, name: 'In A Container' },
      })
      assert.equal(created.status, 201, created.text)
      user = created.json<User>()
      assert.equal(user.email, email)
      assert.ok(
        (await volumeEntries()).some((name) => /^\.lock\.\d+$/.test(name)),
        'the running service holds the lock',
      )
    })

    it('reports healthy to the engine health check', { timeout: 90_000 }, async (t) => {
      if (!needsImage(t)) return
      if (engine.name === 'podman') {
        // Without systemd, podman's health status changes only when a check is run by hand.
        const check = await engine.run(['healthcheck', 'run', first])
        assert.equal(check.code, 0, `${check.stdout}${check.stderr}`)
      }
      const health = await waitFor(
        'healthy',
        async () => {
          const state = await engine.inspect(first, '{{.State.Health.Status}}')
          return state === 'healthy' ? state : undefined
        },
        60_000,
        500,
      )
      assert.equal(health, 'healthy')
    })

    it('stops on SIGTERM within 5 s with exit code 0 and the lock released', {
      timeout: 60_000,
    }, async (t) => {
      if (!needsImage(t)) return
      const stopped = await stop(first)
      t.diagnostic(`${target.name}: stopped in ${stopped.ms.toFixed(0)} ms`)
      assert.ok(stopped.ms < 5000, `stop took ${stopped.ms.toFixed(0)} ms`)
      assert.equal(stopped.code, '0')
      assert.match(await engine.logs(first), /"msg":"stopped","signal":"SIGTERM"/)
      assert.deepEqual(
        stopped.entries.filter((name) => name.startsWith('.lock')),
        [],
      )
      assert.ok(stopped.entries.includes('.jwt-secret'), stopped.entries.join(' '))
    })

    it('keeps the user across stop/start and in a new container on the same volume', {
      timeout: 90_000,
    }, async (t) => {
      if (!needsImage(t)) return
      const stored = user
      assert.ok(stored !== undefined, 'the first container created a user')
      await engine.must(['start', first])
      const restarted = `http://127.0.0.1:${await engine.hostPort(first)}`
      await waitForHealthz(restarted, performance.now(), 10_000)
      await usersLoaded(restarted)
      const again = await request('GET', `${restarted}/users/${stored.id}`, { token: adminToken })
      assert.equal(again.status, 200, again.text)
      assert.equal(again.json<User>().email, stored.email)
      assert.equal((await stop(first)).code, '0')
      await engine.must(['rm', first])

      const { url } = await start(second)
      const read = await request('GET', `${url}/users/${stored.id}`, { token: adminToken })
      assert.equal(read.status, 200, read.text)
      assert.deepEqual(read.json<User>(), again.json<User>())
      // The secret on the volume is used again: no second first start.
      assert.doesNotMatch(await engine.logs(second), FIRST_START)
      const stopped = await stop(second)
      assert.equal(stopped.code, '0')
      assert.deepEqual(
        stopped.entries.filter((name) => name.startsWith('.lock')),
        [],
      )
    })

    it('refuses a bad setting (PORT=abc) with a non-zero exit and one clear line', {
      timeout: 60_000,
    }, async (t) => {
      if (!needsImage(t)) return
      const run = await engine.run([
        'run',
        '--name',
        bad,
        '-v',
        `${volume}:/data`,
        ...engine.readOnlyArgs(),
        '-e',
        'PORT=abc',
        image,
      ])
      assert.notEqual(run.code, 0)
      assert.equal(await engine.inspect(bad, '{{.State.ExitCode}}'), '1')
      const lines = (await engine.logs(bad)).split('\n').filter((line) => line.trim() !== '')
      assert.deepEqual(lines, [
        'user-service: cannot start: PORT must be a whole number, got "abc"',
      ])
    })
  })
}
