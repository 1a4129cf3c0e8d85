import { readdirSync, statSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

// @ts-expect-error: a build script in plain JavaScript, without types
import { buildAdminPage } from '../../scripts/build-admin-page.mjs'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
export const ADMIN_DIST = path.join(ROOT, 'dist', 'admin')

let built = false

/**
 * Builds the admin page into dist/admin/ (where the service run from its sources reads it), once
 * per test process, and answers the folder.
 */
export function buildPage(): string {
  if (!built) {
    ;(buildAdminPage as (out: string) => string)(ADMIN_DIST)
    built = true
  }
  return ADMIN_DIST
}

/** The built page's files and their sizes. */
export function pageFileSizes(): Map<string, number> {
  const dir = buildPage()
  return new Map(readdirSync(dir).map((name) => [name, statSync(path.join(dir, name)).size]))
}
