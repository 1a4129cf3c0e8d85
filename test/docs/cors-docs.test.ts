import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { CORS_ALLOW_HEADERS, CORS_EXPOSE_HEADERS } from '../../src/http/cors.js'
import { readRepoFile } from '../helpers/markdown.js'

/** The text of a document with its line breaks and runs of spaces as one space. */
function flat(relative: string): string {
  return readRepoFile(relative).replace(/\s+/g, ' ')
}

describe('docs/embedding.md and the CORS headers (src/http/cors.ts)', () => {
  it('quotes the headers a preflight allows and every answer exposes, as sent', () => {
    const text = flat('docs/embedding.md')
    assert.ok(
      text.includes(`Access-Control-Allow-Headers: ${CORS_ALLOW_HEADERS}\``),
      CORS_ALLOW_HEADERS,
    )
    assert.ok(
      text.includes(`Access-Control-Expose-Headers: ${CORS_EXPOSE_HEADERS}\``),
      CORS_EXPOSE_HEADERS,
    )
  })
})
