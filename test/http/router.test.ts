import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { HttpError } from '../../src/http/problem.js'
import type { Method, RouteSpec } from '../../src/http/route-spec.js'
import { createRouter } from '../../src/http/router.js'
import { ROUTES } from '../../src/routes/route-list.js'

function spec(method: Method, path: string, fields: Partial<RouteSpec> = {}): RouteSpec {
  return {
    operationId: `${method} ${path}`,
    method,
    path,
    root: false,
    ...fields,
  }
}

/** Runs `match` and returns the HttpError it throws. */
function refusal(run: () => unknown): HttpError {
  try {
    run()
  } catch (error) {
    assert.ok(error instanceof HttpError, `expected an HttpError, got ${String(error)}`)
    return error
  }
  assert.fail('expected the router to refuse the request')
}

const ID = '0193a5f2-7c1e-7d3a-9b2f-1c2d3e4f5a6b'

describe('createRouter', () => {
  describe('compiling the table', () => {
    for (const template of [
      'users',
      '/users/{id',
      '/users/id}',
      '/us ers',
      '/users/{1id}',
      '/users/{id}:Verb',
      '/users/{id}:',
      '/users/{id}:act-ivate',
      '/users/*',
      '/users/%41',
    ]) {
      it(`throws at creation for the bad template "${template}"`, () => {
        assert.throws(() => createRouter([spec('GET', template)]), /route template/)
      })
    }

    it('throws at creation for a route defined twice', () => {
      assert.throws(
        () => createRouter([spec('GET', '/users'), spec('POST', '/users'), spec('GET', '/users')]),
        /GET \/users is defined twice/,
      )
    })

    it('throws for a route defined twice once the base path is applied', () => {
      const routes = [spec('GET', '/v1/users', { root: true }), spec('GET', '/users')]
      assert.throws(() => createRouter(routes, '/v1'), /defined twice/)
      assert.doesNotThrow(() => createRouter(routes, '/v2'))
    })

    it('compiles the service route table, with and without a base path', () => {
      assert.doesNotThrow(() => createRouter(ROUTES))
      assert.doesNotThrow(() => createRouter(ROUTES, '/v1'))
    })
  })

  describe('matching', () => {
    const router = createRouter(ROUTES)

    it('finds each route of the table by method and path', () => {
      const cases: [string, string, string][] = [
        ['GET', '/users', 'listUsers'],
        ['POST', '/users', 'createUser'],
        ['GET', `/users/${ID}`, 'getUser'],
        ['PUT', `/users/${ID}`, 'replaceUser'],
        ['PATCH', `/users/${ID}`, 'updateUser'],
        ['DELETE', `/users/${ID}`, 'deleteUser'],
        ['POST', `/users/${ID}:activate`, 'activateUser'],
        ['POST', `/users/${ID}:suspend`, 'suspendUser'],
        ['GET', '/openapi.json', 'getOpenApi'],
        ['GET', '/healthz', 'getHealth'],
        ['GET', '/readyz', 'getReadiness'],
      ]
      for (const [method, path, operationId] of cases) {
        assert.equal(router.match(method, path).route.operationId, operationId, `${method} ${path}`)
      }
    })

    it('serves HEAD with the GET route', () => {
      assert.equal(router.match('HEAD', '/users').route.operationId, 'listUsers')
      assert.equal(router.match('HEAD', `/users/${ID}`).route.operationId, 'getUser')
      assert.equal(router.match('HEAD', '/healthz').route.operationId, 'getHealth')
    })

    it('gives the id without the verb, still percent-encoded', () => {
      assert.deepEqual({ ...router.match('POST', `/users/${ID}:activate`).rawParams }, { id: ID })
      assert.deepEqual(
        { ...router.match('GET', '/users/a%20b%3Aactivate').rawParams },
        { id: 'a%20b%3Aactivate' },
      )
    })

    it('splits the verb at the first literal colon only', () => {
      const error = refusal(() => router.match('POST', `/users/${ID}:activate:activate`))
      assert.equal(error.code, 'not_found')
      const itemWithColons = refusal(() => router.match('GET', `/users/${ID}:x:y`))
      assert.equal(itemWithColons.code, 'not_found')
    })

    for (const path of [
      '/nope',
      '/usersx',
      '/user',
      '/users/',
      `/users/${ID}/`,
      `/users/${ID}/extra`,
      '/users/x/y',
      '//users',
      'users',
      '*',
      '',
      '/users/:activate',
      `/users/${ID}:`,
      `/users/${ID}:explode`,
      `/users/${ID}:Activate`,
      '/healthz/',
      '/v1/users',
    ]) {
      it(`answers 404 not_found for "${path}"`, () => {
        const error = refusal(() => router.match('GET', path))
        assert.equal(error.code, 'not_found')
        assert.equal(error.status, 404)
      })
    }

    const allows: [string, string, string[]][] = [
      ['DELETE', '/users', ['GET', 'HEAD', 'POST']],
      ['POST', `/users/${ID}`, ['DELETE', 'GET', 'HEAD', 'PATCH', 'PUT']],
      ['GET', `/users/${ID}:activate`, ['POST']],
      ['HEAD', `/users/${ID}:suspend`, ['POST']],
      ['POST', '/healthz', ['GET', 'HEAD']],
      ['OPTIONS', '/openapi.json', ['GET', 'HEAD']],
    ]
    for (const [method, path, allow] of allows) {
      it(`answers 405 for ${method} ${path} with Allow: ${allow.join(', ')}`, () => {
        const error = refusal(() => router.match(method, path))
        assert.equal(error.code, 'method_not_allowed')
        assert.equal(error.status, 405)
        const header = error.headers['allow'] ?? ''
        assert.deepEqual(
          header
            .split(',')
            .map((token) => token.trim())
            .sort(),
          allow,
        )
      })
    }

    it('puts only the non-root routes under the base path', () => {
      const v1 = createRouter(ROUTES, '/v1')
      assert.equal(v1.match('GET', '/v1/users').route.operationId, 'listUsers')
      assert.equal(v1.match('POST', `/v1/users/${ID}:suspend`).route.operationId, 'suspendUser')
      assert.equal(v1.match('GET', '/v1/openapi.json').route.operationId, 'getOpenApi')
      assert.equal(v1.match('GET', '/healthz').route.operationId, 'getHealth')
      assert.equal(v1.match('GET', '/readyz').route.operationId, 'getReadiness')
      for (const path of ['/users', '/openapi.json', '/v1/healthz', '/v1/readyz', '/v1', '/v1/']) {
        assert.equal(refusal(() => v1.match('GET', path)).code, 'not_found', path)
      }
    })
  })

  describe('untrusted parameter values', () => {
    it('gives parameters in a null-prototype object', () => {
      const { rawParams } = createRouter(ROUTES).match('GET', `/users/${ID}`)
      assert.equal(Object.getPrototypeOf(rawParams), null)
    })

    for (const id of ['__proto__', 'constructor', 'prototype', 'hasOwnProperty', 'toString']) {
      it(`keeps "${id}" as an ordinary parameter value, never a prototype key`, () => {
        const router = createRouter(ROUTES)
        for (const path of [`/users/${id}`, `/users/${id}:activate`]) {
          const { rawParams } = router.match(path.includes(':') ? 'POST' : 'GET', path)
          assert.equal(Object.getPrototypeOf(rawParams), null)
          assert.deepEqual(Object.keys(rawParams), ['id'])
          assert.equal(rawParams['id'], id)
        }
        assert.equal(Object.getPrototypeOf({}), Object.prototype)
        assert.equal(({} as Record<string, unknown>)['id'], undefined)
      })
    }

    it('stores a parameter named constructor as an own key', () => {
      const router = createRouter([spec('GET', '/things/{constructor}')])
      const { rawParams } = router.match('GET', '/things/x')
      assert.equal(Object.getPrototypeOf(rawParams), null)
      assert.ok(Object.hasOwn(rawParams, 'constructor'))
      assert.equal(rawParams['constructor'], 'x')
    })

    it('has no parameters, and no prototype keys, on a route without any', () => {
      const { rawParams } = createRouter(ROUTES).match('GET', '/users')
      assert.equal(Object.getPrototypeOf(rawParams), null)
      assert.deepEqual(Object.keys(rawParams), [])
      assert.equal(rawParams['constructor'], undefined)
      assert.equal(rawParams['__proto__'], undefined)
    })
  })
})

describe('createRouter: edges of the template grammar', () => {
  for (const template of [
    '/users/x{id}',
    '/users/{id}x',
    '/users/{id}:activate!',
    '/users/{id}:-x',
    '/users:Export',
    '/:export',
    '/users:',
    '/users:export x',
    'x/users/{id}',
    '/users/{i-d}',
  ]) {
    it(`throws at creation for the bad template "${template}"`, () => {
      assert.throws(
        () => createRouter([spec('GET', template)]),
        (error: unknown) => {
          assert.ok(error instanceof Error)
          assert.equal(error.message.includes(`route template "${template}"`), true)
          return true
        },
      )
    })
  }

  it('accepts a parameter with a camelCase name and verb, and a collection method', () => {
    const router = createRouter([
      spec('POST', '/things/{thingId}:doItNow2'),
      spec('POST', '/things:export'),
      spec('GET', '/a.b_c~d-e/{x}'),
    ])
    assert.deepEqual(
      { ...router.match('POST', '/things/t1:doItNow2').rawParams },
      { thingId: 't1' },
    )
    assert.deepEqual({ ...router.match('POST', '/things:export').rawParams }, {})
    assert.deepEqual({ ...router.match('GET', '/a.b_c~d-e/1').rawParams }, { x: '1' })
  })

  it('matches a collection method only as written, never encoded or split', () => {
    const router = createRouter([spec('POST', '/things:export'), spec('GET', '/things')])
    for (const path of ['/things%3Aexport', '/things:exportx', '/things/export', '/things:']) {
      assert.equal(refusal(() => router.match('POST', path)).code, 'not_found', path)
    }
  })
})

describe('createRouter: a verb is never a path segment', () => {
  const router = createRouter(ROUTES)

  for (const verb of ['activate', 'suspend']) {
    it(`answers 404 not_found for POST /users/{id}/${verb} (no colon)`, () => {
      const error = refusal(() => router.match('POST', `/users/${ID}/${verb}`))
      assert.equal(error.code, 'not_found')
      assert.equal(error.status, 404)
    })
  }

  it('answers 404 for a verb on a route that takes none, and for an empty id before a verb', () => {
    assert.equal(
      refusal(() => router.match('GET', `/users/${ID}:activate`)).code,
      'method_not_allowed',
    )
    assert.equal(refusal(() => router.match('POST', '/users/:suspend')).code, 'not_found')
    assert.equal(refusal(() => router.match('POST', `/users/${ID}:suspendx`)).code, 'not_found')
    assert.equal(refusal(() => router.match('POST', `/users/${ID}:suspen`)).code, 'not_found')
  })

  it('names the method and the template in a 405', () => {
    const error = refusal(() => router.match('DELETE', '/users'))
    assert.equal(error.detail, 'DELETE is not allowed on /users.')
  })

  it("refuses a HEAD with its GET's 405, so that both announce one length", () => {
    const router = createRouter([spec('POST', '/things/{id}:go')])
    const head = refusal(() => router.match('HEAD', '/things/1:go'))
    const get = refusal(() => router.match('GET', '/things/1:go'))
    assert.equal(head.detail, 'GET is not allowed on /things/{id}:go.')
    assert.deepEqual(head, get)
  })

  it('answers 404 with its message for a path that does not start with /', () => {
    const error = refusal(() => router.match('GET', 'users'))
    assert.equal(error.detail, 'There is nothing at this path.')
  })
})

describe('createRouter: the colon of a verb', () => {
  const router = createRouter([spec('POST', '/things/{id}:go')])

  it('needs the colon: a segment that is only the verb is not a match', () => {
    assert.equal(refusal(() => router.match('POST', '/things/go')).code, 'not_found')
  })

  it('takes a one-character id before the verb', () => {
    assert.deepEqual({ ...router.match('POST', '/things/a:go').rawParams }, { id: 'a' })
  })

  it('refuses a path that does not start with / even when its segments would match', () => {
    const users = createRouter([spec('GET', '/users')])
    assert.equal(refusal(() => users.match('GET', 'x/users')).code, 'not_found')
    assert.equal(users.match('GET', '/users').route.operationId, 'GET /users')
  })

  it('throws at creation for a collection method whose literal holds a stray character', () => {
    assert.throws(() => createRouter([spec('POST', '/a b:export')]), /route template/)
  })
})

describe('collection custom methods', () => {
  const router = createRouter(ROUTES)

  it('matches /users:export and /users:import only at a literal colon', () => {
    assert.equal(router.match('GET', '/users:export').route.operationId, 'exportUsers')
    assert.equal(router.match('HEAD', '/users:export').route.operationId, 'exportUsers')
    assert.equal(router.match('POST', '/users:import').route.operationId, 'importUsers')
    assert.equal(
      createRouter(ROUTES, '/v1').match('GET', '/v1/users:export').route.operationId,
      'exportUsers',
    )
    for (const path of [
      '/users%3Aexport',
      '/users%3aimport',
      '/users:exportx',
      '/users:',
      '/users:Export',
      '/v1/users:export',
    ]) {
      assert.equal(refusal(() => router.match('GET', path)).code, 'not_found', path)
      assert.equal(refusal(() => router.match('POST', path)).code, 'not_found', path)
    }
  })

  it('answers a wrong method with 405 and the Allow of that method', () => {
    const onExport = refusal(() => router.match('POST', '/users:export'))
    assert.equal(onExport.code, 'method_not_allowed')
    assert.equal(onExport.headers['allow'], 'GET, HEAD')
    const onImport = refusal(() => router.match('GET', '/users:import'))
    assert.equal(onImport.code, 'method_not_allowed')
    assert.equal(onImport.headers['allow'], 'POST')
  })

  it('refuses a collection verb template that is not a literal and a verb', () => {
    assert.throws(() => createRouter([spec('GET', '/users:Export')]), /bad segment/)
    assert.throws(() => createRouter([spec('GET', '/users:ex:port')]), /bad segment/)
  })
})

describe("createRouter: a route's exists hook", () => {
  const served = new Set(['app.js', '%61pp.js'])
  const exists = ({ file = '' }: Record<string, string>): boolean => served.has(file)

  it('matches a path whose hook says it exists, and gives the hook the raw parameters', () => {
    const seen: string[] = []
    const router = createRouter([
      spec('GET', '/files/{file}', {
        exists: (params) => {
          seen.push(params['file'] ?? '')
          return exists(params)
        },
      }),
    ])
    assert.equal(router.match('GET', '/files/app.js').route.path, '/files/{file}')
    assert.equal(router.match('GET', '/files/%61pp.js').rawParams['file'], '%61pp.js')
    assert.deepEqual(seen, ['app.js', '%61pp.js'])
  })

  it('answers 404, never 405, for every method on a path whose hook says it does not exist', () => {
    // The hook is on the POST route only: it speaks for every method of its template.
    const router = createRouter([
      spec('GET', '/files/{file}'),
      spec('POST', '/files/{file}', { exists }),
    ])
    assert.equal(router.match('GET', '/files/app.js').route.method, 'GET')
    for (const method of ['GET', 'HEAD', 'POST', 'DELETE'] as const) {
      const refused = refusal(() => router.match(method, '/files/nothing.js'))
      assert.equal(refused.code, 'not_found', method)
      assert.equal(refused.headers['allow'], undefined, method)
    }
    assert.equal(refusal(() => router.match('DELETE', '/files/app.js')).code, 'method_not_allowed')
  })

  it('goes on to the next template when the hook says no', () => {
    const router = createRouter([
      spec('GET', '/files/{file}', { exists }),
      spec('GET', '/{dir}/{name}'),
    ])
    assert.equal(router.match('GET', '/files/app.js').route.path, '/files/{file}')
    assert.equal(router.match('GET', '/files/nothing.js').route.path, '/{dir}/{name}')
  })
})
