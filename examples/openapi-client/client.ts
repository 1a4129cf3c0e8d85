/**
 * A whole flow through the typed client: create → get → 304 → PATCH → 412 → list with a cursor
 * (read from Link) → activate → suspend → delete. Every status, header and body it reads is typed
 * from the generated schema.d.ts.
 *
 *   node --import tsx examples/openapi-client/client.ts http://127.0.0.1:8080 "$TOKEN"
 */
import { pathToFileURL } from 'node:url'

import type { components } from './schema.js'
import { createClient } from './typed-fetch.js'

type User = components['schemas']['User']

/** Runs the flow and returns one line per step; throws at the first answer it did not expect. */
export async function runFlow(baseUrl: string, token: string): Promise<string[]> {
  const api = createClient({ baseUrl, token })
  const steps: string[] = []
  const tag = `${Date.now()}.${Math.random().toString(36).slice(2, 8)}`

  const created = await api.POST('/users', {
    params: {},
    body: {
      email: `ada.${tag}@example.com`,
      name: 'Ada Lovelace',
      metadata: { team: 'analytics', floor: '3' },
    },
  })
  if (created.status !== 201) throw unexpected('create', created)
  const location: string = created.headers.Location
  const id = location.split('/').pop() ?? ''
  if (id !== created.body.id)
    throw new Error(`Location ${location} does not name ${created.body.id}`)
  steps.push(`201 created ${location}`)

  const read = await api.GET('/users/{id}', { params: { path: { id } } })
  if (read.status !== 200) throw unexpected('get', read)
  const etag: string = read.headers.ETag
  steps.push(`200 got ${read.body.email} ${etag}`)

  const notModified = await api.GET('/users/{id}', {
    params: { path: { id }, header: { 'If-None-Match': etag } },
  })
  if (notModified.status !== 304) throw unexpected('conditional get', notModified)
  steps.push(`304 not modified ${notModified.headers.ETag}`)

  // RFC 7396: a null metadata value removes the key.
  const patched = await api.PATCH('/users/{id}', {
    params: { path: { id }, header: { 'If-Match': etag } },
    body: { name: 'Augusta Ada King', metadata: { floor: null } },
  })
  if (patched.status !== 200) throw unexpected('patch', patched)
  steps.push(
    `200 patched ${patched.body.name} ${JSON.stringify(patched.body.metadata)} ${patched.headers.ETag}`,
  )

  const stale = await api.PATCH('/users/{id}', {
    params: { path: { id }, header: { 'If-Match': etag } },
    body: { name: 'Lost update' },
  })
  if (stale.status !== 412) throw unexpected('stale patch', stale)
  steps.push(`412 ${stale.body.code}`)

  const second = await api.POST('/users', {
    params: {},
    body: { email: `charles.${tag}@example.com`, name: 'Charles Babbage' },
  })
  if (second.status !== 201) throw unexpected('create second', second)
  const seen = await walk(api, `${tag}@example.com`)
  steps.push(`200 listed ${seen.pages} pages: ${seen.users.map((user) => user.name).join(', ')}`)

  const activated = await api.POST('/users/{id}:activate', { params: { path: { id } } })
  if (activated.status !== 200) throw unexpected('activate', activated)
  steps.push(`200 ${activated.body.status}`)
  const suspended = await api.POST('/users/{id}:suspend', { params: { path: { id } }, body: {} })
  if (suspended.status !== 200) throw unexpected('suspend', suspended)
  steps.push(`200 ${suspended.body.status}`)

  for (const user of [suspended.body, second.body]) {
    const deleted = await api.DELETE('/users/{id}', {
      params: { path: { id: user.id }, header: { 'If-Match': `"v${user.version}"` } },
    })
    if (deleted.status !== 204) throw unexpected('delete', deleted)
  }
  const gone = await api.GET('/users/{id}', { params: { path: { id } } })
  if (gone.status !== 404) throw unexpected('get after delete', gone)
  steps.push(`204 deleted, then 404 ${gone.body.code}`)
  return steps
}

/** Pages of one user each, following Link rel="next" until there is none. */
async function walk(
  api: ReturnType<typeof createClient>,
  q: string,
): Promise<{ users: User[]; pages: number }> {
  const users: User[] = []
  let cursor: string | undefined
  let pages = 0
  do {
    const page = await api.GET('/users', {
      params: { query: cursor === undefined ? { q, limit: 1 } : { cursor, limit: 1 } },
    })
    if (page.status !== 200) throw unexpected('list', page)
    users.push(...page.body.items)
    pages += 1
    // Link is only sent when there is a next page, whatever the generated type says.
    const link: string | undefined = page.headers.Link ?? undefined
    const next = link === undefined ? undefined : /^<([^>]*)>;\s*rel="next"$/.exec(link)?.[1]
    cursor =
      next === undefined
        ? undefined
        : (new URL(next, 'http://base.invalid').searchParams.get('cursor') ?? undefined)
    if ((cursor === undefined) !== (page.body.nextCursor === null))
      throw new Error('Link and nextCursor disagree')
  } while (cursor !== undefined && pages < 10)
  return { users, pages }
}

function unexpected(step: string, answer: { status: number | string; body: unknown }): Error {
  return new Error(`${step}: unexpected ${String(answer.status)} ${JSON.stringify(answer.body)}`)
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [baseUrl, token] = process.argv.slice(2)
  if (baseUrl === undefined || token === undefined) {
    console.error(
      'usage: client.ts <base url> <token with users:read, users:write and users:admin>',
    )
    process.exit(2)
  }
  for (const line of await runFlow(baseUrl, token)) console.log(line)
}
