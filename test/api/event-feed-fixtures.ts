import { readFile } from 'node:fs/promises'
import type { TestContext } from 'node:test'

import { PostgresStore } from '../../src/store/postgres/postgres-store.js'
import type { Store } from '../../src/store/store.js'
import { request } from '../helpers/http.js'
import { freshSchema, requireDatabaseUrl, SKIP_POSTGRES } from '../helpers/postgres.js'
import { uniqueEmail } from '../helpers/service.js'

/** The stores the feed's HTTP tests run on: the file store always, PostgreSQL with DATABASE_URL. */
export interface FeedStore {
  readonly name: string
  /** A skip reason (one line), or false. */
  readonly skip: string | false
  /** The store to give startService; undefined: its own file store in a temporary directory. */
  make(t: TestContext): Store | undefined
}

export const FEED_STORES: readonly FeedStore[] = [
  { name: 'the file store', skip: false, make: () => undefined },
  {
    name: 'PostgreSQL',
    skip: SKIP_POSTGRES,
    make: (t) => {
      const store = new PostgresStore({
        url: requireDatabaseUrl(),
        schema: freshSchema(t),
        eventPollMs: 50,
      })
      t.after(() => store.close())
      return store
    },
  },
]

/**
 * 32 metadata values of 512 two-byte characters: about 33 KB of UTF-8 per user, the largest a
 * user's metadata gets, so that every event of this user is as large as events get.
 */
export function largeMetadata(seed: string): Record<string, string> {
  const metadata: Record<string, string> = {}
  for (let i = 0; i < 32; i += 1) metadata[`key_${i}`] = `${seed}-${i}-`.padEnd(512, 'é')
  return metadata
}

/** Creates one user with large metadata and patches it `times` times: a feed of large events. */
export async function writeLargeFeed(
  baseUrl: string,
  token: string,
  times: number,
): Promise<string> {
  const created = await request('POST', `${baseUrl}/users`, {
    token,
    json: { email: uniqueEmail('large'), name: 'Large', metadata: largeMetadata('v0') },
  })
  if (created.status !== 201) throw new Error(`POST /users: ${created.status} ${created.text}`)
  const { id } = created.json<{ id: string }>()
  for (let i = 1; i <= times; i += 1) {
    const patched = await request('PATCH', `${baseUrl}/users/${id}`, {
      token,
      json: { metadata: { key_0: `v${i}`.padEnd(512, 'é') } },
      contentType: 'application/merge-patch+json',
    })
    if (patched.status !== 200)
      throw new Error(`PATCH /users/${id}: ${patched.status} ${patched.text}`)
  }
  return id
}

/** The resident set size of a process, from /proc/<pid>/status (VmRSS), in bytes. */
export async function residentBytes(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8')
  const kb = /^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1]
  if (kb === undefined) throw new Error(`no VmRSS for process ${pid}`)
  return Number(kb) * 1024
}
