// npm run build:sea: a Node single executable application for Linux x64, dist/user-service, made
// as the Node 20 documentation says: a CommonJS bundle, a blob from sea-config.json, and the blob
// injected with postject into a copy of this node binary. An argument names another output
// directory (the tests build into a temporary one). `--strip` strips the copy of node before the
// blob goes in (binutils' strip; the official Linux build carries about 33 MB of symbols), as the
// container's binary target does; stripping after injection could drop the blob's note.
// Node 25.5 and later can do all of this with `node --build-sea`; postject is kept so that one
// script builds with every Node in engines (20 to 26; the container builds with 26).
import { execFileSync } from 'node:child_process'
import { chmodSync, copyFileSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'

import { build } from 'esbuild'

import { adminPageFiles } from './admin-page-files.mjs'
import { eagerImports } from './eager-imports.mjs'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const { values: flags, positionals } = parseArgs({
  options: { strip: { type: 'boolean', default: false } },
  allowPositionals: true,
})
const OUT = path.resolve(positionals[0] ?? path.join(ROOT, 'dist'))
const EXECUTABLE = path.join(OUT, 'user-service')
const FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2'

if (process.platform !== 'linux' || process.arch !== 'x64') {
  process.stderr.write(
    `build:sea: made for Linux x64, this is ${process.platform} ${process.arch}\n`,
  )
  process.exit(1)
}
// sea-config.json names paths under dist/; they are moved under OUT, the rest is kept as is.
const config = JSON.parse(readFileSync(path.join(ROOT, 'sea-config.json'), 'utf8'))
const main = path.join(OUT, path.relative('dist', config.main))
const blob = path.join(OUT, path.relative('dist', config.output))
const configFile = path.join(OUT, 'sea', 'sea-config.json')
mkdirSync(path.dirname(main), { recursive: true })
writeFileSync(configFile, JSON.stringify({ ...config, main, output: blob }, null, 2))

// A single executable runs one CommonJS script that may require built-in modules only.
await build({
  entryPoints: [path.join(ROOT, 'src', 'bin.ts')],
  outfile: main,
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'cjs',
  external: ['pg'],
  legalComments: 'none',
  logLevel: 'warning',
  // The admin page's files, carried inside (docs/admin-page.md); no lazy module (eager-imports.mjs).
  plugins: [adminPageFiles, eagerImports],
})
execFileSync(process.execPath, ['--experimental-sea-config', configFile], { stdio: 'inherit' })
copyFileSync(process.execPath, EXECUTABLE)
chmodSync(EXECUTABLE, 0o755)
if (flags.strip) execFileSync('strip', ['--strip-all', EXECUTABLE], { stdio: 'inherit' })
const postject = path.join(
  path.dirname(createRequire(import.meta.url).resolve('postject/package.json')),
  'dist',
  'cli.js',
)
execFileSync(
  process.execPath,
  [postject, EXECUTABLE, 'NODE_SEA_BLOB', blob, '--sentinel-fuse', FUSE],
  { stdio: 'inherit' },
)
const { size } = statSync(EXECUTABLE)
process.stdout.write(
  `${path.relative(process.cwd(), EXECUTABLE)}: ${(size / 1024 / 1024).toFixed(1)} MiB (node ${process.version})\n`,
)
