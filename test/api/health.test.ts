import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { request } from '../helpers/http.js'
import { startService } from '../helpers/service.js'

describe('GET /healthz', () => {
  it('returns 200 without a token, with Cache-Control: no-store', async (t) => {
    const s = await startService(t)
    const res = await request('GET', `${s.url}/healthz`)
    assert.equal(res.status, 200)
    assert.equal(res.headers.get('cache-control'), 'no-store')
    assert.deepEqual(res.body, { status: 'ok' })
  })
})
