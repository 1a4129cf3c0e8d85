import { readdirSync, readFileSync } from 'node:fs'

/** One file of the admin page, ready to send. */
export interface PageFile {
  readonly type: string
  readonly body: Buffer
}

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
}

/**
 * Where `npm run build` puts the page (scripts/build-admin-page.mjs): `dist/admin/`, beside the
 * compiled service (`dist/routes/admin/` → `../../admin/`), or seen from the sources run by tsx.
 * The one-file bundle and the single executable carry the files inside instead: their build
 * replaces this module with one that holds them (scripts/admin-page-files.mjs).
 */
const PLACES = ['../../admin/', '../../../dist/admin/']

/** The page's files by name (`index.html` and what it loads); empty when the page was not built. */
export function readPageFiles(): ReadonlyMap<string, PageFile> {
  for (const place of PLACES) {
    const folder = new URL(place, import.meta.url)
    let names: string[]
    try {
      names = readdirSync(folder)
    } catch {
      continue
    }
    if (!names.includes('index.html')) continue
    const files = new Map<string, PageFile>()
    for (const name of names) {
      const type = TYPES[name.slice(name.lastIndexOf('.'))]
      if (type !== undefined) files.set(name, { type, body: readFileSync(new URL(name, folder)) })
    }
    return files
  }
  return new Map()
}
