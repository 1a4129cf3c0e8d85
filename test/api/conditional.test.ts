import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import type { User } from '../../src/domain/user.js'
import { readUserFile } from '../helpers/data-files.js'
import { assertProblem, request, type TestResponse } from '../helpers/http.js'
import { startService, type TestService, uniqueEmail } from '../helpers/service.js'

const UNKNOWN_ID = '0193a5f2-7c1e-7d3a-9b2f-1c2d3e4f5a6b'
const STRONG_ETAG = /^"[\x21\x23-\x7e]*"$/

function assertPrivate(res: TestResponse, label: string): void {
  assert.equal(res.headers.get('cache-control'), 'private, no-cache', `${label}: Cache-Control`)
  assert.match(res.headers.get('vary') ?? '', /(^|,\s*)Authorization(\s*,|$)/i, `${label}: Vary`)
}

function assertNoStore(res: TestResponse, label: string): void {
  assert.equal(res.headers.get('cache-control'), 'no-store', `${label}: Cache-Control`)
}

function etagOf(res: TestResponse): string {
  const etag = res.headers.get('etag')
  assert.ok(etag !== null, `no ETag: ${res.status} ${res.text}`)
  assert.match(etag, STRONG_ETAG)
  return etag
}

async function currentEtag(s: TestService, id: string): Promise<string> {
  const res = await s.call('GET', `/users/${id}`)
  assert.equal(res.status, 200, res.text)
  return etagOf(res)
}

describe('Cache-Control and Vary', () => {
  it('lets successful GET and HEAD of users be kept privately and revalidated', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    for (const [method, target] of [
      ['GET', `/users/${user.id}`],
      ['HEAD', `/users/${user.id}`],
      ['GET', '/users'],
      ['HEAD', '/users'],
      ['GET', '/users?limit=1'],
      ['GET', '/users?status=pending&sort=-createdAt'],
    ] as const) {
      const res = await s.call(method, target)
      assert.equal(res.status, 200, `${method} ${target}: ${res.text}`)
      assertPrivate(res, `${method} ${target}`)
    }
    etagOf(await s.call('GET', `/users/${user.id}`))
    etagOf(await s.call('HEAD', `/users/${user.id}`))
  })

  it('marks writes, deletes and custom methods no-store', async (t) => {
    const s = await startService(t)
    const created = await s.call('POST', '/users', {
      json: { email: uniqueEmail(), name: 'No Store' },
    })
    assert.equal(created.status, 201)
    assertNoStore(created, 'POST /users')
    const id = created.json<User>().id
    const writes: [string, string, unknown, number][] = [
      ['PUT', `/users/${id}`, { email: uniqueEmail(), name: 'Put' }, 200],
      ['PATCH', `/users/${id}`, { name: 'Patch' }, 200],
      ['PATCH', `/users/${id}`, {}, 200],
      ['POST', `/users/${id}:activate`, undefined, 200],
      ['POST', `/users/${id}:activate`, undefined, 200],
      ['POST', `/users/${id}:suspend`, undefined, 200],
      ['DELETE', `/users/${id}`, undefined, 204],
    ]
    for (const [method, target, json, status] of writes) {
      const res = await s.call(method, target, json === undefined ? {} : { json })
      assert.equal(res.status, status, `${method} ${target}: ${res.text}`)
      assertNoStore(res, `${method} ${target}`)
    }
    assertProblem(await s.call('GET', `/users/${id}`), 404, 'not_found')
  })

  it('marks errors on /users no-store, also for GETs', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    const errors: [TestResponse, number, string][] = [
      [await s.call('GET', `/users/${UNKNOWN_ID}`), 404, 'not_found'],
      [await s.call('GET', '/users', { token: undefined }), 401, 'token_missing'],
      [await s.call('GET', '/users?limit=1000'), 400, 'bad_request'],
      [await s.call('GET', '/users/%ZZ'), 400, 'bad_request'],
      [
        await s.call('PATCH', `/users/${user.id}`, {
          json: { name: 'X' },
          headers: { 'if-match': '"stale"' },
        }),
        412,
        'precondition_failed',
      ],
      [
        await s.call('GET', `/users/${user.id}`, { headers: { 'if-match': '"stale"' } }),
        412,
        'precondition_failed',
      ],
      [await s.call('DELETE', '/users'), 405, 'method_not_allowed'],
    ]
    for (const [res, status, code] of errors) {
      assertProblem(res, status, code)
      assertNoStore(res, `${status} ${code}`)
      assert.equal(res.headers.get('etag'), null)
    }
    // HEAD has no body to carry a code: the status and the headers are what it has.
    const head = await s.call('HEAD', `/users/${UNKNOWN_ID}`)
    assert.equal(head.status, 404)
    assert.equal(head.text, '')
    assertNoStore(head, 'HEAD 404')
    assert.equal(head.headers.get('etag'), null)
    assert.deepEqual(await s.getUser(user.id), user)
  })

  it('marks health and readiness no-store', async (t) => {
    const s = await startService(t)
    for (const target of ['/healthz', '/readyz']) {
      const res = await request('GET', `${s.url}${target}`)
      assert.equal(res.status, 200)
      assertNoStore(res, target)
    }
  })
})

describe('ETag', () => {
  it('is strong, and changes with every write that bumps version; GET agrees with each write', async (t) => {
    const s = await startService(t)
    const created = await s.call('POST', '/users', { json: { email: uniqueEmail(), name: 'Etag' } })
    const id = created.json<User>().id
    const seen = [etagOf(created)]
    const writes: [string, string, unknown][] = [
      ['PATCH', `/users/${id}`, { name: 'Etag 2' }],
      ['PUT', `/users/${id}`, { email: uniqueEmail(), name: 'Etag 3' }],
      ['POST', `/users/${id}:activate`, undefined],
      ['POST', `/users/${id}:suspend`, undefined],
      ['PATCH', `/users/${id}`, { metadata: { team: 'x' } }],
    ]
    for (const [method, target, json] of writes) {
      const res = await s.call(method, target, json === undefined ? {} : { json })
      assert.equal(res.status, 200, res.text)
      const etag = etagOf(res)
      assert.ok(!seen.includes(etag), `${method} ${target}: the ETag ${etag} was seen before`)
      seen.push(etag)
      assert.equal(await currentEtag(s, id), etag)
      assert.equal(res.json<User>().version, seen.length)
    }
  })

  it('stays the same for writes that change nothing', async (t) => {
    const s = await startService(t)
    const user = await s.createUser({ metadata: { team: 'a' } })
    const etag = await currentEtag(s, user.id)
    const noOps: [string, string, unknown][] = [
      ['PATCH', `/users/${user.id}`, {}],
      ['PATCH', `/users/${user.id}`, { name: user.name }],
      ['PATCH', `/users/${user.id}`, { metadata: { team: 'a' } }],
      ['PUT', `/users/${user.id}`, { email: user.email, name: user.name, metadata: { team: 'a' } }],
    ]
    for (const [method, target, json] of noOps) {
      const res = await s.call(method, target, { json })
      assert.equal(res.status, 200, res.text)
      assert.equal(etagOf(res), etag, `${method} ${JSON.stringify(json)}`)
    }
    assert.deepEqual(await s.getUser(user.id), user)
    const activated = await s.call('POST', `/users/${user.id}:activate`)
    const again = await s.call('POST', `/users/${user.id}:activate`)
    assert.notEqual(etagOf(activated), etag)
    assert.equal(etagOf(again), etagOf(activated))
  })
})

describe('If-None-Match', () => {
  it('answers 304 for the current ETag, with ETag, Cache-Control and Vary and no body', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    const first = await s.call('GET', `/users/${user.id}`)
    const etag = etagOf(first)
    for (const value of [
      etag,
      '*',
      `"not-this-one", ${etag}`,
      `${etag},"other"`,
      `W/${etag}`,
      ` ${etag} `,
    ]) {
      for (const method of ['GET', 'HEAD']) {
        const res = await s.call(method, `/users/${user.id}`, {
          headers: { 'if-none-match': value },
        })
        assert.equal(
          res.status,
          304,
          `${method} If-None-Match: ${value}: ${res.status} ${res.text}`,
        )
        assert.equal(res.text, '')
        assert.equal(res.headers.get('etag'), etag)
        assertPrivate(res, `304 for ${value}`)
      }
    }
  })

  it('answers 200 with the body for other tags', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    const etag = await currentEtag(s, user.id)
    for (const value of [
      '"a"',
      '"a", "b"',
      `W/"x${etag.slice(1)}`,
      etag.slice(1, -1),
      `"${etag}"`,
    ]) {
      const res = await s.call('GET', `/users/${user.id}`, { headers: { 'if-none-match': value } })
      assert.equal(res.status, 200, `If-None-Match: ${value}`)
      assert.deepEqual(res.json<User>(), user)
    }
  })

  it('answers 200 with the new representation once the user changed', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    const old = await currentEtag(s, user.id)
    assert.equal(
      (await s.call('PATCH', `/users/${user.id}`, { json: { name: 'Changed' } })).status,
      200,
    )
    const res = await s.call('GET', `/users/${user.id}`, { headers: { 'if-none-match': old } })
    assert.equal(res.status, 200)
    assert.equal(res.json<User>().name, 'Changed')
    assert.notEqual(etagOf(res), old)
  })

  it('answers 404 for an unknown user whatever the tag', async (t) => {
    const s = await startService(t)
    for (const value of ['*', '"v1"']) {
      assertProblem(
        await s.call('GET', `/users/${UNKNOWN_ID}`, { headers: { 'if-none-match': value } }),
        404,
        'not_found',
      )
    }
  })
})

describe('If-Match', () => {
  const STALE = '"stale-etag-that-never-matches"'

  it('answers 412 precondition_failed for a stale tag on PUT, PATCH, DELETE, :activate and :suspend, changing nothing', async (t) => {
    const s = await startService(t)
    const pending = await s.createUser()
    const active = await s.createUser()
    assert.equal((await s.call('POST', `/users/${active.id}:activate`)).status, 200)
    const before = await s.snapshot()
    const writes: [string, string, unknown][] = [
      ['PUT', `/users/${pending.id}`, { email: uniqueEmail(), name: 'X' }],
      ['PATCH', `/users/${pending.id}`, { name: 'X' }],
      ['DELETE', `/users/${pending.id}`, undefined],
      ['POST', `/users/${pending.id}:activate`, undefined],
      ['POST', `/users/${active.id}:suspend`, undefined],
      ['POST', `/users/${active.id}:activate`, undefined],
    ]
    for (const [method, target, json] of writes) {
      const res = await s.call(method, target, {
        headers: { 'if-match': STALE },
        ...(json === undefined ? {} : { json }),
      })
      assertProblem(res, 412, 'precondition_failed')
      assertNoStore(res, `${method} ${target}`)
    }
    assert.deepEqual(await s.snapshot(), before)
  })

  it('answers 412 for the ETag a user had before its last change', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    const old = await currentEtag(s, user.id)
    const changed = await s.call('PATCH', `/users/${user.id}`, { json: { name: 'New' } })
    assert.equal(changed.status, 200)
    for (const [method, target] of [
      ['PATCH', `/users/${user.id}`],
      ['DELETE', `/users/${user.id}`],
      ['POST', `/users/${user.id}:activate`],
    ] as const) {
      const res = await s.call(method, target, {
        headers: { 'if-match': old },
        ...(method === 'PATCH' ? { json: { name: 'Newer' } } : {}),
      })
      assertProblem(res, 412, 'precondition_failed')
    }
    assert.deepEqual(await s.getUser(user.id), changed.json<User>())
  })

  it('compares strongly: W/ plus the current tag is 412, and so is the bare unquoted tag', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    const etag = await currentEtag(s, user.id)
    for (const value of [`W/${etag}`, etag.slice(1, -1), `"${etag}"`]) {
      assertProblem(
        await s.call('PATCH', `/users/${user.id}`, {
          json: { name: 'Weak' },
          headers: { 'if-match': value },
        }),
        412,
        'precondition_failed',
      )
      assertProblem(
        await s.call('DELETE', `/users/${user.id}`, { headers: { 'if-match': value } }),
        412,
        'precondition_failed',
      )
      assertProblem(
        await s.call('POST', `/users/${user.id}:activate`, { headers: { 'if-match': value } }),
        412,
        'precondition_failed',
      )
    }
    assert.deepEqual(await s.getUser(user.id), user)
  })

  it('lets *, a list holding the current tag, and the current tag through', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    const star = await s.call('PATCH', `/users/${user.id}`, {
      json: { name: 'Star' },
      headers: { 'if-match': '*' },
    })
    assert.equal(star.status, 200, star.text)
    const listed = await s.call('PATCH', `/users/${user.id}`, {
      json: { name: 'Listed' },
      headers: { 'if-match': `"not-this-one", ${etagOf(star)}, "nor-this"` },
    })
    assert.equal(listed.status, 200, listed.text)
    let etag = etagOf(listed)
    const steps: [string, string, unknown][] = [
      ['PUT', `/users/${user.id}`, { email: uniqueEmail(), name: 'Put' }],
      ['POST', `/users/${user.id}:activate`, undefined],
      ['POST', `/users/${user.id}:suspend`, undefined],
    ]
    for (const [method, target, json] of steps) {
      const res = await s.call(method, target, {
        headers: { 'if-match': etag },
        ...(json === undefined ? {} : { json }),
      })
      assert.equal(res.status, 200, `${method} ${target}: ${res.text}`)
      etag = etagOf(res)
    }
    const del = await s.call('DELETE', `/users/${user.id}`, { headers: { 'if-match': etag } })
    assert.equal(del.status, 204, del.text)
    assertProblem(await s.call('GET', `/users/${user.id}`), 404, 'not_found')
  })

  it('answers 404, not 412, for If-Match: * on an unknown user', async (t) => {
    const s = await startService(t)
    assertProblem(
      await s.call('PATCH', `/users/${UNKNOWN_ID}`, {
        json: { name: 'X' },
        headers: { 'if-match': '*' },
      }),
      404,
      'not_found',
    )
    assertProblem(
      await s.call('DELETE', `/users/${UNKNOWN_ID}`, { headers: { 'if-match': '*' } }),
      404,
      'not_found',
    )
    assert.deepEqual(await s.snapshot(), [])
  })
})

describe('concurrent writers with the same If-Match', () => {
  it('lets exactly one of 10 concurrent PATCHes win; the other nine get 412', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    const etag = await currentEtag(s, user.id)
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        s.call('PATCH', `/users/${user.id}`, {
          json: { name: `Writer ${i}` },
          headers: { 'if-match': etag },
        }),
      ),
    )
    const statuses = answers.map((res) => res.status)
    assert.equal(statuses.filter((status) => status === 200).length, 1, statuses.join(' '))
    assert.equal(statuses.filter((status) => status === 412).length, 9, statuses.join(' '))
    for (const res of answers.filter((answer) => answer.status === 412))
      assertProblem(res, 412, 'precondition_failed')
    const winner = answers.find((res) => res.status === 200)?.json<User>()
    const stored = await s.getUser(user.id)
    assert.deepEqual(stored, winner)
    assert.equal(stored.version, 2)
  })

  it('lets exactly one of 10 concurrent writes of different kinds win', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    const etag = await currentEtag(s, user.id)
    const headers = { 'if-match': etag }
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) => {
        if (i % 3 === 0) return s.call('POST', `/users/${user.id}:activate`, { headers })
        if (i % 3 === 1)
          return s.call('PUT', `/users/${user.id}`, {
            json: { email: uniqueEmail(), name: `Put ${i}` },
            headers,
          })
        return s.call('PATCH', `/users/${user.id}`, { json: { name: `Patch ${i}` }, headers })
      }),
    )
    const statuses = answers.map((res) => res.status)
    assert.equal(statuses.filter((status) => status === 200).length, 1, statuses.join(' '))
    assert.equal(statuses.filter((status) => status === 412).length, 9, statuses.join(' '))
    assert.equal((await s.getUser(user.id)).version, 2)
  })

  it('lets exactly one of 10 concurrent DELETEs win; the others get 412 or 404', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    const other = await s.createUser()
    const etag = await currentEtag(s, user.id)
    const answers = await Promise.all(
      Array.from({ length: 10 }, () =>
        s.call('DELETE', `/users/${user.id}`, { headers: { 'if-match': etag } }),
      ),
    )
    const statuses = answers.map((res) => res.status)
    assert.equal(statuses.filter((status) => status === 204).length, 1, statuses.join(' '))
    // A loser that read the user before the winner removed it fails its If-Match (412); one that
    // came after finds no user (404, which comes before 412): either is right, nothing else is.
    for (const res of answers.filter((answer) => answer.status !== 204)) {
      assert.ok(res.status === 412 || res.status === 404, `${res.status} ${res.text}`)
      assertProblem(res, res.status, res.status === 412 ? 'precondition_failed' : 'not_found')
    }
    // Once the race is over the answer is settled: the user is gone.
    assertProblem(
      await s.call('DELETE', `/users/${user.id}`, { headers: { 'if-match': etag } }),
      404,
      'not_found',
    )
    assertProblem(await s.call('GET', `/users/${user.id}`), 404, 'not_found')
    assert.equal(readUserFile(s.dataDir, user.id), undefined, 'the user file is gone')
    assert.deepEqual(Object.keys(readUserFile(s.dataDir, user.id, 'tombstones') ?? {}), [
      'id',
      'deletedAt',
    ])
    assert.deepEqual(await s.snapshot(), [other])
  })
})
