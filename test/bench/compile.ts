// The reference servers run as plain JavaScript: compiled once per run with esbuild (a dev
// dependency), so that none of them pays tsx's loader at start (the start-up row compares start
// times) or carries it while it serves.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { basename, dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

import { transformSync } from 'esbuild'

const BENCH_DIR = dirname(fileURLToPath(import.meta.url))
/** Under the project's node_modules, so that a compiled reference still finds `pg`. */
const OUT_DIR = resolve(BENCH_DIR, '..', '..', 'node_modules', '.cache', 'user-service-bench')

const done = new Map<string, string>()

/** The path of `test/bench/<name>.ts` compiled to an ES module; compiled on first use. */
export const compiledReference = (name: string): string => {
  const known = done.get(name)
  if (known !== undefined) return known
  const source = join(BENCH_DIR, `${name}.ts`)
  const { code } = transformSync(readFileSync(source, 'utf8'), {
    loader: 'ts',
    format: 'esm',
    target: 'node20',
    sourcefile: source,
  })
  mkdirSync(OUT_DIR, { recursive: true })
  const out = join(OUT_DIR, `${basename(name)}.mjs`)
  writeFileSync(out, code)
  done.set(name, out)
  return out
}
