// npm start and npm run token: builds dist/ (tsc -p tsconfig.build.json, the admin page, the bundle)
// only when a source is newer than the last build, so that a token takes a moment instead of a
// compiler run. A fresh clone has no dist/ and builds; a build that failed or was cut off (Ctrl-C)
// leaves no record, so the next run tries again.
// An argument names another project root (the tests build a small one).

import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = path.resolve(process.argv[2] ?? path.join(fileURLToPath(import.meta.url), '..', '..'))
// Written once every step has succeeded, with the build's start as its time. Not tsc's own
// dist/.tsbuildinfo: tsc writes that before the page and the bundle are built, and a build cut off
// after it would leave a stale bundle that looks up to date.
const RECORD = path.join(ROOT, 'dist', '.built')
// scripts/: the admin page's and the bundle's builds are inputs too.
const INPUTS = ['src', 'admin', 'scripts', 'tsconfig.json', 'tsconfig.build.json', 'package.json']
// The admin page (docs/admin-page.md), built into dist/admin/ after the service.
const ADMIN_BUILD = path.join(ROOT, 'scripts', 'build-admin-page.mjs')
// The command as one file, over tsc's dist/bin.js, as `npm run build` does.
const BUNDLE_BUILD = path.join(ROOT, 'scripts', 'build-bundle.mjs')

/** The latest change under `file`: directories count too, as a deleted source changes its folder. */
function newest(file) {
  let stats
  try {
    stats = statSync(file)
  } catch {
    return 0
  }
  if (!stats.isDirectory()) return stats.mtimeMs
  return readdirSync(file).reduce(
    (latest, name) => Math.max(latest, newest(path.join(file, name))),
    stats.mtimeMs,
  )
}

const built = newest(RECORD)
const changed = Math.max(...INPUTS.map((input) => newest(path.join(ROOT, input))))
if (built === 0 || changed >= built) {
  const started = new Date()
  rmSync(RECORD, { force: true })
  try {
    execFileSync(
      process.execPath,
      [path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'],
      { cwd: ROOT, stdio: 'inherit' },
    )
    if (existsSync(ADMIN_BUILD)) {
      execFileSync(process.execPath, [ADMIN_BUILD], { cwd: ROOT, stdio: 'inherit' })
    }
    if (existsSync(BUNDLE_BUILD)) {
      execFileSync(
        process.execPath,
        [BUNDLE_BUILD, path.join(ROOT, 'dist', 'bin.js'), '--sourcemap'],
        { cwd: ROOT, stdio: ['inherit', 'ignore', 'inherit'] },
      )
    }
  } catch {
    process.exit(1)
  }
  // A source saved while tsc ran is newer than this, so the next run builds again.
  writeFileSync(RECORD, '')
  utimesSync(RECORD, started, started)
}
