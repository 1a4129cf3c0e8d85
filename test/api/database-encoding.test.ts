import assert from 'node:assert/strict'
import { describe, it, type TestContext } from 'node:test'

import { createUserService } from '../../src/process/create-user-service.js'
import { assertProblem, request } from '../helpers/http.js'
import { freshDatabase, SKIP_POSTGRES } from '../helpers/postgres.js'
import { createMemoryLogger, startService } from '../helpers/service.js'
import { TEST_SECRET } from '../helpers/tokens.js'

// Every store takes any Unicode text. A database whose encoding holds only some characters
// (LATIN1 here) would refuse the others with a 400 on PostgreSQL alone, one user at a time: the
// service refuses to start on it instead (docs/postgresql.md).

const encoded = (t: TestContext, encoding: string): Promise<string> =>
  freshDatabase(t, `TEMPLATE template0 ENCODING '${encoding}' LC_COLLATE 'C' LC_CTYPE 'C'`)

const UNICODE_USER = { email: 'İnci.ẞ@example.com', name: 'İnci 😀 ẞ' }

describe('the database encoding', { skip: SKIP_POSTGRES }, () => {
  it('a LATIN1 database is refused at start, naming its encoding; readiness stays 503', async (t) => {
    const databaseUrl = await encoded(t, 'LATIN1')
    const logs: Record<string, unknown>[] = []
    const service = createUserService({
      databaseUrl,
      secret: TEST_SECRET,
      logger: createMemoryLogger(logs),
    })
    const { url } = await service.listen(0, '127.0.0.1')
    t.after(() => service.close())
    await assert.rejects(service.open(), (error: unknown) => {
      assert.ok(error instanceof Error)
      assert.match(error.message, /encoding is LATIN1/)
      assert.match(error.message, /UTF8/)
      return true
    })
    assertProblem(await request('GET', `${url}/readyz`), 503)
  })

  for (const encoding of ['UTF8', 'SQL_ASCII']) {
    it(`a ${encoding} database stores any Unicode text, as every store does`, async (t) => {
      const s = await startService(t, { databaseUrl: await encoded(t, encoding) })
      const created = await s.call('POST', '/users', { json: UNICODE_USER })
      assert.equal(created.status, 201, created.text)
      const user = await s.getUser(created.json<{ id: string }>().id)
      assert.equal(user.email, UNICODE_USER.email)
      assert.equal(user.name, UNICODE_USER.name)
      const found = await s.call('GET', '/users?email=i%CC%87nci.%C3%9F%40example.com')
      assert.deepEqual(found.json<{ items: unknown[] }>().items, [user])
    })
  }
})
