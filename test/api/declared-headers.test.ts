import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { assertProblem } from '../helpers/http.js'
import { startService } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

/*
 * The OpenAPI document declares If-Match, If-None-Match and Last-Event-ID with minLength 1 and a
 * pattern: a value outside them is a 400 that names the header, whichever answer was asked for.
 */

const reader = makeToken({ sub: 'feed-reader', scope: 'events:read' })
const stream = { accept: 'text/event-stream' }

interface FeedPage {
  items: { id: string }[]
  nextCursor: string
}

describe('empty precondition headers', () => {
  it('answers GET /users/{id} with an empty If-None-Match 400 bad_request naming the header', async (t) => {
    const svc = await startService(t)
    const user = await svc.createUser()
    const res = await svc.call('GET', `/users/${user.id}`, { headers: { 'if-none-match': '' } })
    const problem = assertProblem(res, 400, 'bad_request')
    assert.equal(problem.detail, 'The header If-None-Match is empty.')
    assert.equal(res.headers.get('etag'), null)
    assert.equal(res.headers.get('cache-control'), 'no-store')
    // A blank value is empty once the parser strips the white space around it.
    const blank = await svc.call('GET', `/users/${user.id}`, {
      headers: { 'if-none-match': ' \t ' },
    })
    assert.equal(
      assertProblem(blank, 400, 'bad_request').detail,
      'The header If-None-Match is empty.',
    )
    assert.deepEqual(await svc.getUser(user.id), user)
  })

  it('answers PATCH, PUT, DELETE and :activate with an empty If-Match or If-None-Match 400 and changes nothing', async (t) => {
    const svc = await startService(t)
    const user = await svc.createUser()
    const writes: [string, string, Record<string, unknown> | undefined][] = [
      ['PATCH', `/users/${user.id}`, { name: 'Changed' }],
      ['PUT', `/users/${user.id}`, { email: user.email, name: 'Changed' }],
      ['DELETE', `/users/${user.id}`, undefined],
      ['POST', `/users/${user.id}:activate`, undefined],
    ]
    for (const [method, path, json] of writes) {
      for (const name of ['if-match', 'if-none-match']) {
        const res = await svc.call(method, path, {
          ...(json === undefined ? {} : { json }),
          headers: { [name]: '' },
        })
        const problem = assertProblem(res, 400, 'bad_request')
        const header = name === 'if-match' ? 'If-Match' : 'If-None-Match'
        assert.equal(problem.detail, `The header ${header} is empty.`, `${method} ${path}`)
      }
    }
    assert.deepEqual(await svc.snapshot(), [user])
    const events = await svc.call('GET', '/events', { token: reader })
    assert.equal(events.json<FeedPage>().items.length, 1)
  })

  it('still answers a quoted tag and * as before', async (t) => {
    const svc = await startService(t)
    const user = await svc.createUser()
    const tag = `"v${user.version}"`
    const same = await svc.call('GET', `/users/${user.id}`, { headers: { 'if-none-match': tag } })
    assert.equal(same.status, 304)
    const any = await svc.call('GET', `/users/${user.id}`, { headers: { 'if-match': '*' } })
    assert.equal(any.status, 200)
  })
})

describe('Last-Event-ID on pages and streams alike', () => {
  it('answers a malformed or empty Last-Event-ID 400 naming the header, on a page as on a stream', async (t) => {
    const svc = await startService(t)
    await svc.createUser()
    for (const value of ['zzz', '', '8000000000000000']) {
      for (const accept of [{}, stream]) {
        const res = await svc.call('GET', '/events', {
          token: reader,
          headers: { ...accept, 'last-event-id': value },
        })
        const problem = assertProblem(res, 400, 'bad_request')
        assert.match(problem.detail, /^The header Last-Event-ID /, JSON.stringify(value))
      }
    }
  })

  it('gives a page after the event Last-Event-ID names, as after does; after wins over it', async (t) => {
    const svc = await startService(t)
    await svc.createUser()
    await svc.createUser()
    await svc.createUser()
    const all = (await svc.call('GET', '/events', { token: reader })).json<FeedPage>().items
    assert.equal(all.length, 3)
    const [first, second, third] = all.map((event) => event.id)
    assert.ok(first !== undefined && second !== undefined && third !== undefined)
    const resumed = await svc.call('GET', '/events', {
      token: reader,
      headers: { 'last-event-id': first },
    })
    assert.equal(resumed.status, 200, resumed.text)
    assert.deepEqual(
      resumed.json<FeedPage>().items.map((event) => event.id),
      [second, third],
    )
    const both = await svc.call('GET', `/events?after=${second}`, {
      token: reader,
      headers: { 'last-event-id': first },
    })
    assert.deepEqual(
      both.json<FeedPage>().items.map((event) => event.id),
      [third],
    )
  })
})
