import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { parseResolvConf } from '../../src/webhooks/search-names.js'

describe('the search domains of a resolv.conf', () => {
  it('takes the last of search and domain, and ndots up to 15', () => {
    const text =
      '# a comment\nsearch a.example b.example\ndomain c.example\noptions ndots:20 rotate\n'
    assert.deepEqual(parseResolvConf(text), { search: ['c.example'], ndots: 15 })
    assert.deepEqual(parseResolvConf('domain c.example\nsearch  a.example.\tb.example\n'), {
      search: ['a.example', 'b.example'],
      ndots: 1,
    })
  })

  it('has none for the root, an empty file or an ndots it cannot read', () => {
    assert.deepEqual(parseResolvConf('search .\noptions ndots:x\n'), { search: [], ndots: 1 })
    assert.deepEqual(parseResolvConf(''), { search: [], ndots: 1 })
  })
})
