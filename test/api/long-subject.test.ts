import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { describe, it } from 'node:test'

import { assertProblem } from '../helpers/http.js'
import { startService, uniqueEmail } from '../helpers/service.js'
import { STORES } from '../helpers/store-cases.js'
import { makeToken } from '../helpers/tokens.js'

// A token's `sub` keys its Idempotency-Keys on every store; PostgreSQL indexes it, and an index
// entry holds at most about 2.7 KB. A subject of any length the service accepts must therefore
// work on every store, and a longer one must be refused alike everywhere (docs/api.md, tokens).

/** `length` characters that do not compress (an index entry may be compressed). */
const subject = (length: number): string =>
  randomBytes(length).toString('base64url').slice(0, length)

for (const store of STORES) {
  describe(`a token's subject length on the ${store.name} store`, { skip: store.skip }, () => {
    it('a 255-character subject writes with an Idempotency-Key and replays', async (t) => {
      const s = await startService(t, store.make(t))
      const token = makeToken({ sub: subject(255) })
      const json = { email: uniqueEmail('long-sub'), name: 'Long subject' }
      const headers = { 'Idempotency-Key': '"long-subject"' }
      const first = await s.call('POST', '/users', { token, json, headers })
      assert.equal(first.status, 201, first.text)
      const again = await s.call('POST', '/users', { token, json, headers })
      assert.equal(again.status, 201, again.text)
      assert.equal(again.headers.get('idempotent-replayed'), 'true')
      assert.equal(again.text, first.text)
    })

    it('a longer subject is 401 token_invalid, with or without an Idempotency-Key', async (t) => {
      const s = await startService(t, store.make(t))
      for (const length of [256, 3000]) {
        const token = makeToken({ sub: subject(length) })
        const json = { email: uniqueEmail('long-sub'), name: 'Long subject' }
        const keyed = await s.call('POST', '/users', {
          token,
          json,
          headers: { 'Idempotency-Key': '"long-subject"' },
        })
        assertProblem(keyed, 401, 'token_invalid')
        assertProblem(await s.call('GET', '/users', { token }), 401, 'token_invalid')
      }
      assert.deepEqual(await s.snapshot(), [])
    })
  })
}
