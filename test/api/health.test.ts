import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { assertProblem, request } from '../helpers/http.js'
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

describe('GET /healthz and GET /readyz at the root', () => {
  it('answer HEAD like GET, without a body', async (t) => {
    const s = await startService(t)
    for (const probe of ['/healthz', '/readyz']) {
      const res = await request('HEAD', `${s.url}${probe}`)
      assert.equal(res.status, 200, probe)
      assert.equal(res.text, '')
      assert.equal(res.headers.get('cache-control'), 'no-store')
    }
  })

  it('stay at the root when a base path is set', async (t) => {
    const s = await startService(t, { basePath: '/v1' })
    assert.equal((await request('GET', `${s.url}/healthz`)).status, 200)
    assert.equal((await request('GET', `${s.url}/readyz`)).status, 200)
    assertProblem(await request('GET', `${s.url}/v1/healthz`), 404, 'not_found')
    assertProblem(await request('GET', `${s.url}/v1/readyz`), 404, 'not_found')
  })

  it('ignore a token, even an invalid one', async (t) => {
    const s = await startService(t)
    const res = await request('GET', `${s.url}/healthz`, { token: 'not.a.token' })
    assert.equal(res.status, 200)
    assert.equal((await request('GET', `${s.url}/readyz`, { token: 'not.a.token' })).status, 200)
  })

  it('answer another method with 405 and Allow', async (t) => {
    const s = await startService(t)
    const res = await request('POST', `${s.url}/healthz`, { json: {} })
    assertProblem(res, 405, 'method_not_allowed')
    assert.match(res.headers.get('allow') ?? '', /\bGET\b/)
  })
})
