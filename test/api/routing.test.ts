import assert from 'node:assert/strict'
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { describe, it } from 'node:test'

import type { User } from '../../src/domain/user.js'
import { FaultyStore } from '../helpers/faulty-store.js'
import { assertProblem, request, type TestResponse } from '../helpers/http.js'
import { startService, uniqueEmail } from '../helpers/service.js'
import { sendOverSocket } from '../helpers/socket-http.js'

const UNKNOWN_ID = '0193a5f2-7c1e-7d3a-9b2f-1c2d3e4f5a6b'
const ITEM_ALLOW = ['DELETE', 'GET', 'HEAD', 'PATCH', 'PUT']

/** The methods of an Allow header, sorted (their order carries no meaning). */
function allowOf(res: TestResponse): string[] {
  return (res.headers.get('allow') ?? '')
    .split(',')
    .map((token) => token.trim())
    .filter((token) => token !== '')
    .sort()
}

function codeOf(body: unknown): unknown {
  return typeof body === 'object' && body !== null && 'code' in body ? body.code : undefined
}

/** A JSON body for the methods that need one, so that only the route can be at fault. */
function bodyFor(method: string): { json?: unknown } {
  if (method === 'PUT') return { json: { email: uniqueEmail(), name: 'Replaced' } }
  if (method === 'PATCH') return { json: { name: 'Patched' } }
  return {}
}

describe('unknown paths', () => {
  it('answers 404 not_found for paths no route names, for any method', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    const before = await s.snapshot()
    const targets = [
      '/nope',
      '/usersx',
      '/user',
      '/users.json',
      '/users/x/y',
      `/users/${user.id}/extra`,
      '/users/',
      `/users/${user.id}/`,
      '/Users',
      '/healthz/',
      '/readyz/x',
      '/openapi.json/',
    ]
    for (const target of targets) {
      for (const method of ['GET', 'POST', 'DELETE']) {
        const res = await s.call(
          method,
          target,
          method === 'POST' ? { json: { email: uniqueEmail(), name: 'X' } } : {},
        )
        assertProblem(res, 404, 'not_found')
      }
    }
    assert.deepEqual(await s.snapshot(), before)
  })

  // RFC 9110 §8.6: a HEAD's Content-Length is the one its GET would send.
  it("announces on a HEAD's 405 the Content-Length of its GET's", async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    for (const target of [`/users/${user.id}:activate`, '/users:import']) {
      const [head, get] = await Promise.all(
        ['HEAD', 'GET'].map((method) =>
          request(method, `${s.url}${target}`, {
            token: s.token,
            headers: { 'x-request-id': 'same-length' },
          }),
        ),
      )
      assert.equal(head?.status, 405)
      assert.equal(get?.status, 405)
      assert.equal(head.headers.get('content-length'), String(Buffer.byteLength(get.text)), target)
    }
  })

  it('answers 404 for targets fetch would normalise, sent as they are', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    for (const target of [
      `/users/../users/${user.id}`,
      `/users/./${user.id}`,
      '//users',
      `/users//${user.id}`,
    ]) {
      const res = await sendOverSocket(s.url, {
        method: 'GET',
        target,
        headers: { authorization: `Bearer ${s.token}` },
      })
      assert.equal(res.status, 404, `${target}: ${res.text}`)
      assert.equal(codeOf(res.body), 'not_found', target)
    }
  })

  it('routes an absolute-form request target like its path (RFC 9112 §3.2.2: a server MUST accept it)', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    const res = await sendOverSocket(s.url, {
      method: 'GET',
      target: `${s.url}/users/${user.id}`,
      headers: { authorization: `Bearer ${s.token}` },
    })
    assert.equal(res.status, 200, res.text)
    assert.deepEqual(res.body, user)
  })
})

describe('405 method_not_allowed', () => {
  const cases: [string, string, string[]][] = [
    ['DELETE', '/users', ['GET', 'HEAD', 'POST']],
    ['PUT', '/users', ['GET', 'HEAD', 'POST']],
    ['PATCH', '/users', ['GET', 'HEAD', 'POST']],
    ['POST', '/users/{id}', ITEM_ALLOW],
    ['OPTIONS', '/users/{id}', ITEM_ALLOW],
    ...['GET', 'HEAD', 'PUT', 'PATCH', 'DELETE'].flatMap((method): [string, string, string[]][] => [
      [method, '/users/{id}:activate', ['POST']],
      [method, '/users/{id}:suspend', ['POST']],
    ]),
    ['POST', '/healthz', ['GET', 'HEAD']],
    ['DELETE', '/healthz', ['GET', 'HEAD']],
    ['POST', '/readyz', ['GET', 'HEAD']],
    ['PUT', '/readyz', ['GET', 'HEAD']],
    ['POST', '/openapi.json', ['GET', 'HEAD']],
    ['DELETE', '/openapi.json', ['GET', 'HEAD']],
  ]

  it('answers a wrong method on every known path with 405 and the exact Allow, changing nothing', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    const before = await s.snapshot()
    for (const [method, template, allow] of cases) {
      const target = template.replace('{id}', user.id)
      const res = await request(method, `${s.url}${target}`, { token: s.token, ...bodyFor(method) })
      const label = `${method} ${template}`
      if (method === 'HEAD') {
        assert.equal(res.status, 405, label)
        assert.equal(res.text, '', label)
      } else {
        assertProblem(res, 405, 'method_not_allowed')
      }
      assert.deepEqual(
        allowOf(res),
        allow,
        `${label}: Allow was "${res.headers.get('allow') ?? ''}"`,
      )
    }
    assert.deepEqual(await s.snapshot(), before)
  })

  it('answers 405 on an item path whatever the id (the route decides before the user is looked up)', async (t) => {
    const s = await startService(t)
    for (const id of [UNKNOWN_ID, 'not-a-uuid']) {
      const res = await s.call('POST', `/users/${id}`, { json: { name: 'X' } })
      assertProblem(res, 405, 'method_not_allowed')
      assert.deepEqual(allowOf(res), ITEM_ALLOW)
    }
  })
})

describe('HEAD', () => {
  it('answers HEAD /users/{id} like GET: 200, empty body, same ETag, Cache-Control, Vary and Content-Length', async (t) => {
    const s = await startService(t)
    const user = await s.createUser({ metadata: { team: 'analytics' } })
    const get = await s.call('GET', `/users/${user.id}`)
    const head = await s.call('HEAD', `/users/${user.id}`)
    assert.equal(get.status, 200)
    assert.equal(head.status, 200)
    assert.equal(head.text, '')
    for (const name of ['etag', 'cache-control', 'vary', 'content-length', 'content-type']) {
      assert.equal(head.headers.get(name), get.headers.get(name), name)
    }
    assert.equal(Number(head.headers.get('content-length')), Buffer.byteLength(get.text))
  })

  it('answers HEAD /users like GET /users', async (t) => {
    const s = await startService(t)
    await s.createUser()
    const get = await s.call('GET', '/users')
    const head = await s.call('HEAD', '/users')
    assert.equal(head.status, 200)
    assert.equal(head.text, '')
    for (const name of ['cache-control', 'vary', 'content-length', 'content-type']) {
      assert.equal(head.headers.get(name), get.headers.get(name), name)
    }
  })

  for (const target of ['/healthz', '/readyz', '/openapi.json']) {
    it(`answers HEAD ${target} without a token like GET`, async (t) => {
      const s = await startService(t)
      const get = await request('GET', `${s.url}${target}`)
      const head = await request('HEAD', `${s.url}${target}`)
      assert.equal(get.status, 200)
      assert.equal(head.status, 200)
      assert.equal(head.text, '')
      assert.equal(head.headers.get('content-length'), get.headers.get('content-length'))
      assert.equal(head.headers.get('cache-control'), get.headers.get('cache-control'))
    })
  }

  it('answers HEAD of an unknown user with 404 and an empty body', async (t) => {
    const s = await startService(t)
    const head = await s.call('HEAD', `/users/${UNKNOWN_ID}`)
    assert.equal(head.status, 404)
    assert.equal(head.text, '')
    assert.equal(head.headers.get('cache-control'), 'no-store')
  })

  it('answers HEAD without a token with 401 and an empty body', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    const head = await request('HEAD', `${s.baseUrl}/users/${user.id}`)
    assert.equal(head.status, 401)
    assert.equal(head.text, '')
  })

  it('sends no body for HEAD even when the socket is read raw', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    const res = await sendOverSocket(s.url, {
      method: 'HEAD',
      target: `/users/${user.id}`,
      headers: { authorization: `Bearer ${s.token}` },
    })
    assert.equal(res.status, 200)
    assert.equal(res.text, '')
    assert.ok(Number(res.headers.get('content-length')) > 0)
  })
})

describe('custom methods after a literal colon', () => {
  it('reaches :activate and :suspend through a literal colon', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    const activated = await s.call('POST', `/users/${user.id}:activate`)
    assert.equal(activated.status, 200, activated.text)
    assert.equal(activated.json<User>().status, 'active')
    const suspended = await s.call('POST', `/users/${user.id}:suspend`)
    assert.equal(suspended.status, 200, suspended.text)
    assert.equal(suspended.json<User>().status, 'suspended')
  })

  it('treats an encoded colon (%3A, %3a) as part of the id: GET 404, POST 405 with the item Allow', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    for (const target of [
      `/users/${user.id}%3Aactivate`,
      `/users/${user.id}%3aactivate`,
      `/users/${user.id}%3Asuspend`,
    ]) {
      const post = await s.call('POST', target)
      assertProblem(post, 405, 'method_not_allowed')
      assert.deepEqual(allowOf(post), ITEM_ALLOW, `POST ${target}`)
      assertProblem(await s.call('GET', target), 404, 'not_found')
      assertProblem(await s.call('PATCH', target, { json: { name: 'X' } }), 404, 'not_found')
      assertProblem(await s.call('DELETE', target), 404, 'not_found')
    }
    assert.deepEqual(await s.getUser(user.id), user)
  })

  it('does not decode the verb: an encoded letter in it is an unknown verb', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    assertProblem(await s.call('POST', `/users/${user.id}:activat%65`), 404, 'not_found')
    assert.deepEqual(await s.getUser(user.id), user)
  })

  for (const suffix of [
    ':explode',
    ':delete',
    ':Activate',
    ':activate2',
    ':',
    ':activate:activate',
    ':activate/',
  ]) {
    it(`answers the unknown verb "${suffix}" with a route 404 and changes nothing`, async (t) => {
      const s = await startService(t)
      const user = await s.createUser()
      for (const method of ['POST', 'GET', 'DELETE']) {
        assertProblem(await s.call(method, `/users/${user.id}${suffix}`), 404, 'not_found')
      }
      assert.deepEqual(await s.getUser(user.id), user)
    })
  }

  it('answers a verb without an id with 404', async (t) => {
    const s = await startService(t)
    assertProblem(await s.call('POST', '/users/:activate'), 404, 'not_found')
  })
})

describe('malformed percent-encoding in the path', () => {
  const ids = ['%ZZ', 'abc%', '%4', '%E0%A4%A', '%FF', '%C3%28', '%C0%AF', '%ED%A0%80', '%80']

  for (const id of ids) {
    it(`answers "${id}" with 400 bad_request on every item route and changes nothing`, async (t) => {
      const s = await startService(t)
      const user = await s.createUser()
      const before = await s.snapshot()
      for (const raw of [id, `${user.id}${id}`]) {
        for (const method of ['GET', 'PUT', 'PATCH', 'DELETE']) {
          assertProblem(await s.call(method, `/users/${raw}`, bodyFor(method)), 400, 'bad_request')
        }
        assertProblem(await s.call('POST', `/users/${raw}:activate`), 400, 'bad_request')
        assertProblem(await s.call('POST', `/users/${raw}:suspend`), 400, 'bad_request')
      }
      assert.deepEqual(await s.snapshot(), before)
    })
  }

  it('answers a malformed escape sent raw on the socket with 400', async (t) => {
    const s = await startService(t)
    const res = await sendOverSocket(s.url, {
      method: 'GET',
      target: '/users/%ZZ',
      headers: { authorization: `Bearer ${s.token}` },
    })
    assert.equal(res.status, 400)
    assert.equal(codeOf(res.body), 'bad_request')
  })
})

describe('ids that are not canonical UUIDs', () => {
  it('answers 404 on every item route without touching storage', async (t) => {
    const store = new FaultyStore()
    const s = await startService(t, { store })
    const user = await s.createUser()
    const bad = [
      'not-a-uuid',
      '12345',
      user.id.toUpperCase(),
      user.id.replaceAll('-', ''),
      `${user.id}x`,
      `x${user.id}`,
      `%7B${user.id}%7D`,
      `${user.id}%00`,
      `%20${user.id}`,
      `urn:uuid:${user.id}`,
      `${user.id.slice(0, -1)}`,
      `${user.id}0`,
      '__proto__',
      'constructor',
      'prototype',
      `${user.id.slice(0, 9)}${user.id.slice(10)}`,
      user.id.replace(/-/g, '_'),
      `${user.id}%3Aactivate`,
    ]
    store.calls.length = 0
    for (const id of bad) {
      for (const method of ['GET', 'HEAD', 'PUT', 'PATCH', 'DELETE']) {
        const res = await s.call(method, `/users/${id}`, bodyFor(method))
        if (method === 'HEAD') assert.equal(res.status, 404, `HEAD ${id}`)
        else assertProblem(res, 404, 'not_found')
      }
      if (!id.includes('%3A')) {
        for (const verb of ['activate', 'suspend']) {
          assertProblem(await s.call('POST', `/users/${id}:${verb}`), 404, 'not_found')
        }
      }
    }
    assert.deepEqual(
      store.callsOf('get', 'create', 'update', 'delete'),
      [],
      'a non-canonical id reached the store',
    )
    assert.deepEqual(await s.getUser(user.id), user)
  })

  it('reaches the store for a canonical id (the counting store sees real lookups)', async (t) => {
    const store = new FaultyStore()
    const s = await startService(t, { store })
    store.calls.length = 0
    assertProblem(await s.call('GET', `/users/${UNKNOWN_ID}`), 404, 'not_found')
    assert.deepEqual(store.callsOf('get'), [{ method: 'get', id: UNKNOWN_ID }])
  })

  it('does not drop a leading byte order mark (%EF%BB%BF) from an id', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    assertProblem(await s.call('GET', `/users/%EF%BB%BF${user.id}`), 404, 'not_found')
    assertProblem(await s.call('POST', `/users/%EF%BB%BF${user.id}:activate`), 404, 'not_found')
    assert.deepEqual(await s.getUser(user.id), user)
  })
})

describe('path traversal', () => {
  /** Every file under `root` with its content, as sorted [relative path, content] pairs. */
  async function listFiles(root: string): Promise<[string, string][]> {
    const found: [string, string][] = []
    const walk = async (dir: string): Promise<void> => {
      for (const entry of await readdir(dir, { withFileTypes: true })) {
        const full = path.join(dir, entry.name)
        if (entry.isDirectory()) await walk(full)
        else found.push([path.relative(root, full), await readFile(full, 'utf8')])
      }
    }
    await walk(root)
    return found.sort(([a], [b]) => (a < b ? -1 : 1))
  }

  it('answers traversal-looking ids with 404 and never touches files around the data directory', async (t) => {
    const s = await startService(t)
    const user = await s.createUser()
    const root = path.dirname(s.dataDir)
    const victim = JSON.stringify({
      id: '00000000-0000-7000-8000-000000000000',
      email: 'victim@example.com',
      name: 'Victim',
      status: 'active',
      metadata: {},
      createdAt: '2020-01-01T00:00:00.000Z',
      updatedAt: '2020-01-01T00:00:00.000Z',
      version: 1,
    })
    await writeFile(path.join(root, 'victim.json'), victim)
    await writeFile(path.join(root, 'victim'), victim)
    await writeFile(path.join(s.dataDir, 'victim.json'), victim)
    await mkdir(path.join(root, 'outside'))
    await writeFile(path.join(root, 'outside', 'victim.json'), victim)
    const before = await listFiles(root)
    const ids = [
      '..%2F..%2Fvictim',
      '..%2F..%2Foutside%2Fvictim',
      '..%2Fvictim',
      '%2E%2E%2F%2E%2E%2Fvictim',
      '..%5C..%5Cvictim',
      '%252e%252e%252fvictim',
      '..%2F..%2Fvictim.json%00',
      '....%2F%2F....%2F%2Fvictim',
      `..%2F${user.id}`,
      `${user.id}%2F..%2F..%2Fvictim`,
      '..',
      '.',
      '%2E%2E',
      '%2E',
      '..%2F..%2F..%2F..%2F..%2F..%2Fetc%2Fpasswd',
    ]
    for (const id of ids) {
      const got = await s.call('GET', `/users/${id}`)
      assertProblem(got, 404, 'not_found')
      assert.ok(!got.text.includes('victim@example.com'), `GET ${id} read a file outside the store`)
      assert.ok(!got.text.includes('root:'), `GET ${id} read a system file`)
      assertProblem(
        await s.call('PUT', `/users/${id}`, {
          json: { email: uniqueEmail(), name: 'Overwritten' },
        }),
        404,
        'not_found',
      )
      assertProblem(
        await s.call('PATCH', `/users/${id}`, { json: { name: 'Overwritten' } }),
        404,
        'not_found',
      )
      assertProblem(await s.call('DELETE', `/users/${id}`), 404, 'not_found')
      assertProblem(await s.call('POST', `/users/${id}:suspend`), 404, 'not_found')
    }
    assert.deepEqual(
      await listFiles(root),
      before,
      'files around or inside the data directory changed',
    )
    assert.deepEqual(await s.getUser(user.id), user)
  })
})

describe('BASE_PATH', () => {
  it('puts /users and /openapi.json under the base path only, with the base path in Location', async (t) => {
    const s = await startService(t, { basePath: '/v1' })
    assert.equal(s.baseUrl, `${s.url}/v1`)
    const created = await s.call('POST', '/users', {
      json: { email: uniqueEmail(), name: 'Base Path' },
    })
    assert.equal(created.status, 201, created.text)
    const user = created.json<User>()
    assert.equal(created.headers.get('location'), `/v1/users/${user.id}`)
    assert.equal((await s.call('GET', `/users/${user.id}`)).status, 200)
    assert.equal((await s.call('GET', '/users')).status, 200)
    assert.equal((await request('GET', `${s.baseUrl}/openapi.json`)).status, 200)

    assertProblem(await request('GET', `${s.url}/users`, { token: s.token }), 404, 'not_found')
    assertProblem(
      await request('GET', `${s.url}/users/${user.id}`, { token: s.token }),
      404,
      'not_found',
    )
    assertProblem(
      await request('POST', `${s.url}/users`, {
        token: s.token,
        json: { email: uniqueEmail(), name: 'X' },
      }),
      404,
      'not_found',
    )
    assertProblem(await request('GET', `${s.url}/openapi.json`), 404, 'not_found')
    assertProblem(await request('GET', `${s.url}/v2/users`, { token: s.token }), 404, 'not_found')
    assert.deepEqual(
      (await s.snapshot()).map((entry) => entry.id),
      [user.id],
    )
  })

  it('keeps /healthz and /readyz at the root', async (t) => {
    const s = await startService(t, { basePath: '/v1' })
    assert.equal((await request('GET', `${s.url}/healthz`)).status, 200)
    assert.equal((await request('GET', `${s.url}/readyz`)).status, 200)
    assertProblem(await request('GET', `${s.baseUrl}/healthz`), 404, 'not_found')
    assertProblem(await request('GET', `${s.baseUrl}/readyz`), 404, 'not_found')
  })

  it('answers a wrong method under the base path with 405, and carries the base path in Link', async (t) => {
    const s = await startService(t, { basePath: '/v1' })
    await s.createUser()
    await s.createUser()
    const del = await s.call('DELETE', '/users')
    assertProblem(del, 405, 'method_not_allowed')
    assert.deepEqual(allowOf(del), ['GET', 'HEAD', 'POST'])
    const page = await s.call('GET', '/users?limit=1')
    assert.equal(page.status, 200)
    assert.match(page.headers.get('link') ?? '', /^<\/v1\/users\?/)
  })
})

describe('collection custom methods after a literal colon', () => {
  it('answers an encoded colon (/users%3Aexport) as an unknown path: 404, not the export', async (t) => {
    const app = await startService(t)
    for (const target of ['/users%3Aexport', '/users%3aimport']) {
      assertProblem(await app.call('GET', target), 404, 'not_found')
      assertProblem(
        await app.call('POST', target, { body: '{}', contentType: 'application/x-ndjson' }),
        404,
        'not_found',
      )
    }
  })

  it('answers a wrong method on /users:export and /users:import with 405 and Allow, importing nothing', async (t) => {
    const app = await startService(t)
    const onExport = await app.call('POST', '/users:export', {
      body: '{"email":"a@example.com","name":"A"}\n',
      contentType: 'application/x-ndjson',
    })
    assertProblem(onExport, 405, 'method_not_allowed')
    assert.deepEqual(allowOf(onExport), ['GET', 'HEAD'])
    const onImport = await app.call('PUT', '/users:import', {
      body: '{"email":"a@example.com","name":"A"}\n',
      contentType: 'application/x-ndjson',
    })
    assertProblem(onImport, 405, 'method_not_allowed')
    assert.deepEqual(allowOf(onImport), ['POST'])
    assert.deepEqual(await app.snapshot(), [])
  })
})
