// The admin page inside the one-file bundle and the single executable: an esbuild plugin that
// builds the page (scripts/build-admin-page.mjs) into a temporary folder and puts its files in
// place of src/routes/admin/page-files.ts, which reads them from dist/admin/ otherwise.

import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'

import { buildAdminPage } from './build-admin-page.mjs'

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
}

/** The source of a page-files module that holds the files instead of reading them. */
function embeddedPageFiles() {
  const out = mkdtempSync(path.join(tmpdir(), 'user-service-admin-'))
  try {
    buildAdminPage(out)
    const entries = readdirSync(out)
      .filter((name) => TYPES[path.extname(name)] !== undefined)
      .sort()
      .map((name) => {
        // Every file of the page is UTF-8 text: carried as a string, it weighs what it weighs.
        const text = readFileSync(path.join(out, name), 'utf8')
        return `  [${JSON.stringify(name)}, { type: ${JSON.stringify(TYPES[path.extname(name)])}, body: Buffer.from(${JSON.stringify(text)}) }],`
      })
    return `export function readPageFiles() {\n  return new Map([\n${entries.join('\n')}\n  ])\n}\n`
  } finally {
    rmSync(out, { recursive: true, force: true })
  }
}

/** The esbuild plugin. */
export const adminPageFiles = {
  name: 'admin-page-files',
  setup(build) {
    build.onLoad({ filter: /[\\/]routes[\\/]admin[\\/]page-files\.ts$/ }, () => ({
      contents: embeddedPageFiles(),
      loader: 'js',
    }))
  },
}
