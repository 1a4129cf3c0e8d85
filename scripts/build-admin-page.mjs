// The admin page (docs/admin-page.md): its TypeScript compiled by tsc alone (admin/tsconfig.json)
// into browser ES modules, and its HTML, CSS and icon copied beside them. `npm run build` puts the
// page in dist/admin/, where the service reads it; an argument writes it elsewhere (the one-file
// bundle and the single executable build it into a temporary folder and carry it inside).

import { execFileSync } from 'node:child_process'
import { copyFileSync, mkdirSync, readdirSync } from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const PAGE = path.join(ROOT, 'admin')
const STATIC = ['.html', '.css', '.svg']

/** Builds the page into `out` (default dist/admin) and answers the folder. */
export function buildAdminPage(out = path.join(ROOT, 'dist', 'admin')) {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc')
  execFileSync(process.execPath, [tsc, '-p', path.join(PAGE, 'tsconfig.json'), '--outDir', out], {
    stdio: 'inherit',
  })
  mkdirSync(out, { recursive: true })
  for (const name of readdirSync(PAGE)) {
    if (STATIC.includes(path.extname(name)))
      copyFileSync(path.join(PAGE, name), path.join(out, name))
  }
  return out
}

if (process.argv[1] === fileURLToPath(import.meta.url)) buildAdminPage(process.argv[2])
