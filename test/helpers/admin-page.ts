import assert from 'node:assert/strict'
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'

// @ts-expect-error: a build script in plain JavaScript, without types
import { buildAdminPage } from '../../scripts/build-admin-page.mjs'
import { PROJECT_ROOT } from './project-root.js'

export const ADMIN_DIST = path.join(PROJECT_ROOT, 'dist', 'admin')

let built = false

/**
 * Builds the admin page into dist/admin/ (where the service run from its sources reads it), once
 * per test process, and answers the folder. Test files running side by side each build it: each
 * builds into a folder of its own, then moves every file into place in one rename, so that a
 * service never reads a file half written.
 */
export function buildPage(): string {
  if (built) return ADMIN_DIST
  const own = mkdtempSync(path.join(tmpdir(), 'user-service-admin-build-'))
  try {
    ;(buildAdminPage as (out: string) => string)(own)
    mkdirSync(ADMIN_DIST, { recursive: true })
    for (const name of readdirSync(own)) {
      const next = path.join(ADMIN_DIST, `.${name}.${process.pid}`)
      copyFileSync(path.join(own, name), next)
      renameSync(next, path.join(ADMIN_DIST, name))
    }
  } finally {
    rmSync(own, { recursive: true, force: true })
  }
  built = true
  return ADMIN_DIST
}

/** The built page's files and their sizes. */
export function pageFileSizes(): Map<string, number> {
  const dir = buildPage()
  // A name starting with a dot is a file another test process is moving into place.
  const names = readdirSync(dir).filter((name) => !name.startsWith('.'))
  return new Map(names.map((name) => [name, statSync(path.join(dir, name)).size]))
}

/** What a page or a script refers to: src and href attributes, static and dynamic imports. */
function references(text: string): string[] {
  const found = [
    ...text.matchAll(/\b(?:src|href)="([^"]+)"/g),
    ...text.matchAll(/\bfrom\s+'([^']+)'/g),
    ...text.matchAll(/\bimport\s*\(\s*'([^']+)'\s*\)/g),
    ...text.matchAll(/^import\s+'([^']+)'/gm),
  ]
  return found.map((match) => match[1] ?? '')
}

/** Everything the page loads, by URL, followed from the page through its imports, over HTTP. */
export async function loadEverything(
  pageUrl: string,
): Promise<Map<string, Response & { bytes: number }>> {
  const loaded = new Map<string, Response & { bytes: number }>()
  const queue = [pageUrl]
  while (queue.length > 0) {
    const url = queue.shift() ?? ''
    if (loaded.has(url)) continue
    const res = await fetch(url)
    const body = Buffer.from(await res.arrayBuffer())
    loaded.set(url, Object.assign(res, { bytes: body.length }))
    if (res.status !== 200) continue
    const type = res.headers.get('content-type') ?? ''
    if (/html|javascript/.test(type)) {
      for (const ref of references(body.toString('utf8'))) queue.push(new URL(ref, url).href)
    }
  }
  return loaded
}

/** The CSP of the admin page and its files (docs/admin-page.md). */
export const ADMIN_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
  "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

/**
 * What every form of the service (npm package, one-file bundle, single executable, images)
 * promises of the admin page: the page and each file it loads, 200 with the CSP, from `origin`.
 */
export async function checkAdminPageServed(origin: string): Promise<number> {
  const loaded = await loadEverything(`${origin}/admin`)
  assert.ok(loaded.size >= 10, `the page and its files: ${[...loaded.keys()].join(', ')}`)
  for (const [url, res] of loaded) {
    assert.equal(res.status, 200, url)
    assert.equal(res.headers.get('content-security-policy'), ADMIN_CSP, url)
  }
  assert.ok([...loaded.keys()].some((url) => url.endsWith('/admin/main.js')))
  return loaded.size
}
