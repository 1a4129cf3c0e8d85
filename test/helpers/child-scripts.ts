import { createHash } from 'node:crypto'
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
} from 'node:fs'
import path from 'node:path'

import { buildSync } from 'esbuild'

import { PROJECT_ROOT } from './project-root.js'

/** The folders compiled, and what else decides their JavaScript. */
const COMPILED = ['src', 'test/helpers']
const INPUTS = [...COMPILED, 'tsconfig.json']

/**
 * Inside node_modules, so that the compiled modules' imports of packages (`import('pg')`,
 * esbuild) find them as the sources do, and so that git and Biome leave it alone.
 */
const CACHE = path.join(PROJECT_ROOT, 'node_modules', '.cache', 'user-service-tests')

/** Other trees are removed after this long: a test process of another checkout may be using one. */
const KEEP_OLD_MS = 60 * 60 * 1000

function* files(place: string): Generator<string> {
  if (!statSync(place).isDirectory()) {
    yield place
    return
  }
  for (const name of readdirSync(place).sort()) yield* files(path.join(place, name))
}

/** A digest of every input's path and bytes: a changed source makes a new tree. */
function inputsDigest(): string {
  const hash = createHash('sha256')
  for (const input of INPUTS)
    for (const file of files(path.join(PROJECT_ROOT, input)))
      hash.update(`${path.relative(PROJECT_ROOT, file)}\0`).update(readFileSync(file))
  return hash.digest('hex').slice(0, 16)
}

let tree: string | undefined

/**
 * src/ and test/helpers/ compiled to JavaScript, module for module, in the project's layout, with
 * a source map beside each file (by which c8 counts a child's coverage on src/), built once per
 * change of the inputs and shared by the test files. The tests' children run it instead of the
 * sources through tsx: a service started and stopped through tsx took about 2.4 s of CPU against
 * 0.8 s compiled (tsx's loader thread resolves and transforms every module of every child), and
 * the suite starts hundreds of children. esbuild compiles a module as tsx does, with the same
 * tsconfig.json.
 *
 * Each test process that finds the tree missing builds one in a folder of its own, then renames
 * it into place whole, so that no child runs a half-written tree.
 */
function compiledTree(): string {
  if (tree !== undefined) return tree
  const digest = inputsDigest()
  const folder = path.join(CACHE, digest)
  if (!existsSync(folder)) {
    // A sibling of the folder, so that the maps' relative paths to the sources stay right.
    const own = path.join(CACHE, `${digest}.${process.pid}`)
    rmSync(own, { recursive: true, force: true })
    mkdirSync(own, { recursive: true })
    buildSync({
      entryPoints: COMPILED.flatMap((name) => [...files(path.join(PROJECT_ROOT, name))]).filter(
        (file) => file.endsWith('.ts'),
      ),
      outdir: own,
      outbase: PROJECT_ROOT,
      format: 'esm',
      platform: 'node',
      target: 'node20',
      sourcemap: 'linked',
      sourcesContent: false,
      logLevel: 'warning',
    })
    // The sources run from the project read the built admin page in dist/admin/ (one level above
    // src/): so do the compiled ones.
    symlinkSync(path.join(PROJECT_ROOT, 'dist'), path.join(own, 'dist'))
    try {
      renameSync(own, folder)
    } catch {
      // Another test process put the same tree in place first.
      rmSync(own, { recursive: true, force: true })
    }
    removeOldTrees(digest)
  }
  tree = folder
  return folder
}

function removeOldTrees(current: string): void {
  for (const name of readdirSync(CACHE)) {
    const place = path.join(CACHE, name)
    // A builder's own folder (`<digest>.<pid>`) left by a killed test process goes the same way.
    if (name !== current && Date.now() - statSync(place).mtimeMs > KEEP_OLD_MS)
      rmSync(place, { recursive: true, force: true })
  }
}

/** The service's command (src/bin.ts), compiled: what a child runs to serve. */
export function serviceScript(): string {
  return path.join(compiledTree(), 'src', 'bin.js')
}

/** A helper of test/helpers that runs as a child (a writer killed mid-write, a lock racer), compiled. */
export function helperScript(name: string): string {
  return path.join(compiledTree(), 'test', 'helpers', `${name}.js`)
}
