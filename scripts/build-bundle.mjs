// npm run build:bundle: the whole service as one ES module, dist/user-service.mjs, runnable with
// `node dist/user-service.mjs` and no node_modules (the service has no runtime dependencies).
// An argument writes the file elsewhere (the tests build into a temporary directory).

import { stat } from 'node:fs/promises'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

import { build } from 'esbuild'

import { adminPageFiles } from './admin-page-files.mjs'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const BUNDLE = path.resolve(process.argv[2] ?? path.join(ROOT, 'dist', 'user-service.mjs'))

await build({
  entryPoints: [path.join(ROOT, 'src', 'bin.ts')],
  outfile: BUNDLE,
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'esm',
  // The PostgreSQL driver is an optional peer, loaded with import('pg') only when asked for.
  external: ['pg'],
  legalComments: 'none',
  logLevel: 'warning',
  // The admin page's files, carried inside (docs/admin-page.md).
  plugins: [adminPageFiles],
})
const { size } = await stat(BUNDLE)
process.stdout.write(`${path.relative(process.cwd(), BUNDLE)}: ${(size / 1024).toFixed(1)} KiB\n`)
