import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { readFile, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'
import { fileURLToPath } from 'node:url'

import { runFlow } from '../examples/openapi-client/client.js'
import { MemoryStore } from '../src/store/memory-store.js'
import { request } from './helpers/http.js'
import { makeTempDir, startService, type TestService } from './helpers/service.js'

/*
 * Tools nobody here wrote, run on the served document through npx with pinned versions (dev tools
 * fetched on demand into the npx cache, never dependencies). Without the registry these tests skip.
 */
const REDOCLY = '@redocly/cli@2.77.0'
const SPECTRAL = '@stoplight/spectral-cli@6.16.3'
// openapi-typescript 7 needs TypeScript 5 beside it (a bare install may pull a newer major and crash).
const OPENAPI_TYPESCRIPT = [
  '-p',
  'typescript@5.9.3',
  '-p',
  'openapi-typescript@7.13.0',
  'openapi-typescript',
]

const ROOT = path.resolve(fileURLToPath(import.meta.url), '../..')
const EXAMPLE = path.join(ROOT, 'examples/openapi-client')
const TOOL_TIMEOUT_MS = 240_000

interface ToolRun {
  code: number | null
  stdout: string
  stderr: string
}

function run(command: string, args: readonly string[], cwd = ROOT): Promise<ToolRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd,
      env: { ...process.env, ...NPM_ENV, NO_COLOR: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk
    })
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk
    })
    child.on('error', reject)
    child.on('close', (code) => {
      resolve({ code, stdout, stderr })
    })
  })
}

// Few, short retries: without a registry a test should skip in seconds, not after npm's minutes.
const NPM_ENV = {
  npm_config_update_notifier: 'false',
  npm_config_fetch_retries: '1',
  npm_config_fetch_retry_mintimeout: '2000',
  npm_config_fetch_retry_maxtimeout: '5000',
}
const OFFLINE =
  /E(NOTFOUND|AI_AGAIN|CONNREFUSED|CONNRESET|TIMEDOUT|NETUNREACH|HOSTUNREACH)|network|request to https?:\/\/\S+ failed/i
let offline: string | undefined

/** Runs a pinned tool through npx; undefined (and the test skipped) when npx could not fetch it. */
async function npx(t: TestContext, args: readonly string[]): Promise<ToolRun | undefined> {
  const tool = args.filter((arg) => arg.includes('@') && !arg.startsWith('-')).join(' and ')
  if (offline === undefined) {
    const result = await run('npx', ['--yes', '--prefer-offline', ...args])
    if (result.code === 0 || result.stdout.trim() !== '' || !OFFLINE.test(result.stderr))
      return result
    offline =
      result.stderr
        .split('\n')
        .find((line) => OFFLINE.test(line))
        ?.trim() ?? 'no answer'
  }
  t.skip(`skipped: npx could not fetch ${tool} from the npm registry (${offline})`)
  return undefined
}

/** The document as served, with and without a base path, written to files for the linters. */
async function servedDocuments(t: TestContext): Promise<string[]> {
  const dir = await makeTempDir(t, 'openapi-lint-')
  const files: string[] = []
  for (const basePath of ['', '/v1']) {
    const s = await startService(t, { store: new MemoryStore(), basePath })
    const res = await request('GET', `${s.baseUrl}/openapi.json`)
    assert.equal(res.status, 200)
    const file = path.join(dir, `openapi${basePath.replace('/', '-')}.json`)
    await writeFile(file, res.text)
    files.push(file)
  }
  return files
}

describe('the served OpenAPI document and the tools people point at it', () => {
  it('passes Redocly CLI lint (recommended rules) with no error and no warning', {
    timeout: TOOL_TIMEOUT_MS,
  }, async (t) => {
    for (const file of await servedDocuments(t)) {
      // One file a run: with several, the JSON reports come out back to back.
      const result = await npx(t, [
        REDOCLY,
        'lint',
        '--config',
        path.join(ROOT, 'redocly.yaml'),
        '--format=json',
        file,
      ])
      if (result === undefined) return
      const report = JSON.parse(result.stdout) as {
        totals: { errors: number; warnings: number }
        problems: { ruleId: string; message: string }[]
      }
      assert.deepEqual(
        report.problems.map((problem) => `${problem.ruleId}: ${problem.message}`),
        [],
        file,
      )
      assert.deepEqual(
        { errors: report.totals.errors, warnings: report.totals.warnings },
        { errors: 0, warnings: 0 },
      )
      assert.equal(result.code, 0, result.stderr)
    }
  })

  it('passes Spectral lint (spectral:oas through .spectral.yaml) with no result at all', {
    timeout: TOOL_TIMEOUT_MS,
  }, async (t) => {
    const files = await servedDocuments(t)
    const result = await npx(t, [
      SPECTRAL,
      'lint',
      '--ruleset',
      path.join(ROOT, '.spectral.yaml'),
      '--format',
      'json',
      '--fail-severity',
      'hint',
      ...files,
    ])
    if (result === undefined) return
    const json = result.stdout.slice(0, result.stdout.lastIndexOf(']') + 1)
    const results = JSON.parse(json) as { code: string; path: string[]; message: string }[]
    assert.deepEqual(
      results.map((found) => `${found.code} at ${found.path.join('.')}: ${found.message}`),
      [],
    )
    assert.equal(result.code, 0, result.stderr)
  })

  it('gives openapi-typescript types that type-check a client running the whole flow against the service', {
    timeout: TOOL_TIMEOUT_MS,
  }, async (t) => {
    const s: TestService = await startService(t, { basePath: '/v1' })
    const dir = await makeTempDir(t, 'openapi-types-')
    const generated = path.join(dir, 'schema.d.ts')
    const result = await npx(t, [
      ...OPENAPI_TYPESCRIPT,
      `${s.baseUrl}/openapi.json`,
      '--output',
      generated,
    ])
    if (result === undefined) return
    assert.equal(result.code, 0, result.stderr)

    // The example's committed types are exactly what the served document generates today.
    const committed = await readFile(path.join(EXAMPLE, 'schema.d.ts'), 'utf8')
    assert.equal(
      await readFile(generated, 'utf8'),
      committed,
      'examples/openapi-client/schema.d.ts is stale: regenerate it as docs/api.md says',
    )

    const tsc = await run(process.execPath, [
      path.join(ROOT, 'node_modules/typescript/bin/tsc'),
      '--strict',
      '--noEmit',
      '--skipLibCheck',
      '--target',
      'es2022',
      '--module',
      'nodenext',
      '--moduleResolution',
      'nodenext',
      '--types',
      'node',
      path.join(EXAMPLE, 'client.ts'),
    ])
    assert.equal(tsc.code, 0, `tsc --strict: ${tsc.stdout}${tsc.stderr}`)

    const steps = await runFlow(s.baseUrl, s.token)
    assert.equal(steps.length, 9, steps.join('\n'))
    assert.match(steps[0] ?? '', /^201 created \/v1\/users\/[0-9a-f-]{36}$/)
    assert.match(steps[2] ?? '', /^304 not modified "v1"$/)
    assert.match(steps[3] ?? '', /^200 patched Augusta Ada King \{"team":"analytics"\} "v2"$/)
    assert.equal(steps[4], '412 precondition_failed')
    assert.equal(steps[5], '200 listed 2 pages: Augusta Ada King, Charles Babbage')
    assert.deepEqual(steps.slice(6), [
      '200 active',
      '200 suspended',
      '204 deleted, then 404 not_found',
    ])
    assert.deepEqual(await s.snapshot(), [], 'the flow deletes both users it made')
  })
})
