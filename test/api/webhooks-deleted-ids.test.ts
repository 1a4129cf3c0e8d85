import assert from 'node:assert/strict'
import { readdir, readFile } from 'node:fs/promises'
import path from 'node:path'
import { describe, it } from 'node:test'

import { sleep, startChild } from '../helpers/child.js'
import { makeTempDir } from '../helpers/service.js'
import { ADMIN } from '../helpers/webhook-api.js'

/** The service lists its endpoints every 5 s: a deleted one is forgotten after a listing. */
const LISTING_MS = 5000

describe('a service that deletes webhook endpoints', () => {
  it('keeps none of their ids once the endpoints were listed again (memory does not grow)', async (t) => {
    const dir = await makeTempDir(t)
    const child = await startChild({
      dataDir: path.join(dir, 'data'),
      env: {
        NODE_OPTIONS: `--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${dir}`,
        WEBHOOK_ALLOW_NETWORKS: '127.0.0.0/8',
      },
    })
    t.after(() => child.stop())
    const call = (method: string, route: string, body?: unknown) =>
      fetch(`${child.url}/webhooks${route}`, {
        method,
        headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      })
    const ids: string[] = []
    for (let i = 0; i < 50; i += 1) {
      const created = await call('POST', '', { url: 'http://127.0.0.1:9/hook' })
      assert.equal(created.status, 201)
      const { id } = (await created.json()) as { id: string }
      ids.push(id)
      assert.equal((await call('DELETE', `/${id}`)).status, 204)
    }
    await sleep(LISTING_MS * 1.5)
    child.proc.kill('SIGUSR2')
    // The snapshot is written on the service's own thread: an answer after it means it is done.
    let snapshot: string | undefined
    while (snapshot === undefined) {
      await sleep(100)
      if ((await call('GET', '')).status !== 200) continue
      snapshot = (await readdir(dir)).find((name) => name.endsWith('.heapsnapshot'))
    }
    const heap = await readFile(path.join(dir, snapshot), 'utf8')
    assert.deepEqual(
      ids.filter((id) => heap.includes(id)),
      [],
    )
  })
})
