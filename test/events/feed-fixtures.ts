import { readFileSync } from 'node:fs'

import { eventJson, parseEvent } from '../../src/domain/event.js'
import { request, type TestResponse } from '../helpers/http.js'
import { makeToken } from '../helpers/tokens.js'

/** Tokens of the feed tests: a reader of the feed only, and a writer of users. */
export const feedReader = makeToken({ sub: 'feed-reader', scope: 'events:read', ttl: 3600 })
export const feedWriter = makeToken({
  sub: 'feed-writer',
  scope: 'users:read users:write users:admin',
  ttl: 3600,
})

export interface FeedPage {
  items: {
    id: string
    type: string
    userId: string
    version: number
    user?: Record<string, unknown>
  }[]
  nextCursor: string
}

/**
 * Metadata of about 33 KB as the feed writes it (32 keys of 512 '€', three bytes each in UTF-8),
 * the largest a user may have; `tag` makes the users differ.
 */
export function bigMetadata(tag: string): Record<string, string> {
  const metadata: Record<string, string> = {}
  for (let i = 0; i < 32; i += 1)
    metadata[`k${String(i).padStart(2, '0')}`] = `${tag}${'€'.repeat(512 - tag.length)}`
  return metadata
}

/** The bytes of a page's events as the store measures them: each event's JSON as served. */
export function pageBytes(res: TestResponse): number {
  const page = res.json<FeedPage>()
  return page.items.reduce((sum, item) => {
    const event = parseEvent(JSON.stringify(item))
    if (event === undefined) throw new Error(`not an event: ${JSON.stringify(item).slice(0, 200)}`)
    return sum + Buffer.byteLength(eventJson(event))
  }, 0)
}

/** A PATCH of one metadata key: a small request that appends one large event. */
export async function patchMetadata(url: string, userId: string, value: string): Promise<void> {
  const res = await request('PATCH', `${url}/users/${userId}`, {
    token: feedWriter,
    json: { metadata: { k00: value } },
    contentType: 'application/merge-patch+json',
  })
  if (res.status !== 200) throw new Error(`PATCH ${userId}: ${res.status} ${res.text}`)
}

/** Creates a user with large metadata; returns its id. */
export async function createBigUser(url: string, tag: string): Promise<string> {
  const res = await request('POST', `${url}/users`, {
    token: feedWriter,
    json: {
      email: `big.${tag}.${process.pid}.${Date.now()}@example.com`,
      name: 'Big',
      metadata: bigMetadata(tag),
    },
  })
  if (res.status !== 201) throw new Error(`POST /users: ${res.status} ${res.text}`)
  return res.json<{ id: string }>().id
}

/** Every event of the feed, following nextCursor from `after` until a page is empty. */
export async function readWholeFeed(
  url: string,
  query = 'limit=1000',
): Promise<{ pages: TestResponse[]; items: FeedPage['items'] }> {
  const pages: TestResponse[] = []
  const items: FeedPage['items'] = []
  let after = ''
  for (;;) {
    const res = await request(
      'GET',
      `${url}/events?${query}${after === '' ? '' : `&after=${after}`}`,
      { token: feedReader },
    )
    if (res.status !== 200) throw new Error(`GET /events: ${res.status} ${res.text}`)
    const page = res.json<FeedPage>()
    pages.push(res)
    items.push(...page.items)
    if (page.items.length === 0) return { pages, items }
    if (page.nextCursor <= after)
      throw new Error(`the cursor went back: ${after} then ${page.nextCursor}`)
    after = page.nextCursor
  }
}

/** The resident set of a process, and its peak, in MB (VmRSS and VmHWM of /proc/<pid>/status). */
export function memoryOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const field = (name: string): number =>
    Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN) / 1024
  return { rss: field('VmRSS'), peak: field('VmHWM') }
}
