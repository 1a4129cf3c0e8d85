import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { MemoryStore } from '../../src/store/memory-store.js'
import { assertProblem } from '../helpers/http.js'
import { readRepoFile } from '../helpers/markdown.js'
import { startService } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

/** The text of a document with its line breaks and runs of spaces as one space. */
function flat(relative: string): string {
  return readRepoFile(relative).replace(/\s+/g, ' ')
}

describe('docs/api.md and the WWW-Authenticate of a 401 and a 403', () => {
  it('quotes each as sent, realm included', async (t) => {
    const s = await startService(t, { store: new MemoryStore() })
    const text = flat('docs/api.md')
    const missing = await s.call('GET', '/users', { token: undefined })
    assertProblem(missing, 401, 'token_missing')
    const challenge = missing.headers.get('www-authenticate') ?? ''
    assert.ok(text.includes(`\`WWW-Authenticate: ${challenge}\``), challenge)

    const reader = makeToken({ scope: 'users:read' })
    const scope = await s.call('GET', '/users:export', { token: reader })
    assertProblem(scope, 403, 'insufficient_scope')
    const sent = scope.headers.get('www-authenticate') ?? ''
    assert.match(sent, /scope="users:admin"$/)
    const quoted = sent.replace('scope="users:admin"', 'scope="…"')
    assert.ok(text.includes(`\`WWW-Authenticate: ${quoted}\``), quoted)
  })
})
