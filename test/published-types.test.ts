import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import {
  copyFile,
  cp,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rm,
  symlink,
  writeFile,
} from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import { promisify } from 'node:util'

import type pg from 'pg'
import ts from 'typescript'

import type { PgModule } from '../src/store/postgres/pg-types.js'
import { PROJECT_ROOT } from './helpers/child.js'

const run = promisify(execFile)
const TSC = path.join(PROJECT_ROOT, 'node_modules', 'typescript', 'bin', 'tsc')

// The store's own description of the driver must fit the real one (checked by `npm run typecheck`).
const realPgFits: typeof pg extends PgModule ? true : never = true

/** The environment minus NODE_V8_COVERAGE: the compiler's own coverage is of no interest. */
function withoutCoverage(): NodeJS.ProcessEnv {
  const env = { ...process.env }
  delete env['NODE_V8_COVERAGE']
  return env
}

/** The first folder at or above `dir` that holds a node_modules folder, if any. */
function nodeModulesAbove(dir: string): string | undefined {
  for (let current = dir; ; current = path.dirname(current)) {
    if (existsSync(path.join(current, 'node_modules'))) return current
    if (path.dirname(current) === current) return undefined
  }
}

async function listDeclarations(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true })
  return entries.filter((entry) => entry.endsWith('.d.ts')).sort()
}

/** Every module a declaration file names: imports, exports, import() types, type references. */
function modulesNamedBy(text: string): string[] {
  const info = ts.preProcessFile(text, true, true)
  return [
    ...info.importedFiles.map((file) => file.fileName),
    ...info.typeReferenceDirectives.map((reference) => reference.fileName),
  ]
}

/** The embedding example of docs/embedding.md, its PostgreSQL store and the testing entry. */
const CONSUMER = `import { createServer } from 'node:http'
import {
  createUserService,
  MemoryStore,
  PostgresStore,
  type PostgresStoreOptions,
} from 'user-service'
import { startTestService } from 'user-service/testing'

const users = createUserService({
  store: new MemoryStore(),
  secret: process.env.JWT_SECRET ?? '',
  basePath: '/api',
})
await users.open()

createServer((req, res) => {
  if (req.url?.startsWith('/api/')) return users.handler(req, res)
  res.end('the rest of my app')
}).listen(3000)

const options: PostgresStoreOptions = { url: 'postgres://app@db.internal/users', schema: 'app' }
export const onPostgres = createUserService({ store: new PostgresStore(options), secret: 's' })
export const tested = await startTestService()
`

describe('the published type declarations (tsconfig.build.json)', () => {
  let tmp = ''
  let dist = ''

  before(async () => {
    tmp = await mkdtemp(path.join(tmpdir(), 'user-service-types-'))
    dist = path.join(tmp, 'dist')
    await run(
      process.execPath,
      [
        TSC,
        '-p',
        'tsconfig.build.json',
        '--emitDeclarationOnly',
        '--outDir',
        dist,
        '--tsBuildInfoFile',
        path.join(tmp, 'tsbuildinfo'),
      ],
      { cwd: PROJECT_ROOT, timeout: 90_000, env: withoutCoverage() },
    )
  })
  after(() => rm(tmp, { recursive: true, force: true }))

  it('name no module pg: the driver is an optional peer dependency without types of its own', async () => {
    assert.equal(realPgFits, true)
    const files = await listDeclarations(dist)
    assert.ok(files.includes('index.d.ts') && files.includes('store/postgres/connection.d.ts'))
    const naming: string[] = []
    for (const file of files) {
      const named = modulesNamedBy(await readFile(path.join(dist, file), 'utf8'))
      for (const name of named) if (name === 'pg' || name.startsWith('pg/')) naming.push(file)
    }
    assert.deepEqual(naming, [])
  })

  it('compile in a project without @types/pg, with skipLibCheck off (tsc --strict)', {
    timeout: 90_000,
  }, async (t) => {
    const above = nodeModulesAbove(tmp)
    if (above !== undefined) {
      t.skip(`a node_modules folder in ${above} is visible from the temporary directory`)
      return
    }
    const consumer = path.join(tmp, 'consumer')
    const installed = path.join(consumer, 'node_modules', 'user-service')
    await mkdir(path.join(consumer, 'node_modules', '@types'), { recursive: true })
    await cp(dist, path.join(installed, 'dist'), { recursive: true })
    await copyFile(path.join(PROJECT_ROOT, 'package.json'), path.join(installed, 'package.json'))
    // Node's types (and undici's, which they import) as a TypeScript user has them; nothing else.
    const modules = path.join(PROJECT_ROOT, 'node_modules')
    await symlink(
      path.join(modules, '@types', 'node'),
      path.join(consumer, 'node_modules', '@types', 'node'),
      'dir',
    )
    await symlink(
      path.join(modules, 'undici-types'),
      path.join(consumer, 'node_modules', 'undici-types'),
      'dir',
    )
    await writeFile(path.join(consumer, 'package.json'), '{ "type": "module" }\n')
    await writeFile(path.join(consumer, 'app.ts'), CONSUMER)

    const compiled = await run(
      process.execPath,
      [
        TSC,
        '--noEmit',
        '--strict',
        '--skipLibCheck',
        'false',
        '--module',
        'nodenext',
        '--moduleResolution',
        'nodenext',
        '--target',
        'es2022',
        '--typeRoots',
        path.join(consumer, 'node_modules', '@types'),
        '--listFiles',
        'app.ts',
      ],
      { cwd: consumer, timeout: 60_000, env: withoutCoverage() },
    ).catch((error: { stdout?: string; stderr?: string }) => {
      assert.fail(`tsc failed:\n${error.stdout ?? ''}${error.stderr ?? ''}`)
    })
    const listed = compiled.stdout.split('\n')
    // The compiler read the package's PostgreSQL declarations and no pg types from anywhere.
    assert.ok(
      listed.some((file) => file.endsWith('user-service/dist/store/postgres/connection.d.ts')),
      compiled.stdout,
    )
    assert.deepEqual(
      listed.filter((file) => file.includes('/pg/') || file.includes('/@types/pg')),
      [],
    )
  })
})
