import assert from 'node:assert/strict'
import { describe, it, type TestContext } from 'node:test'

import { readTraceId } from '../../src/http/trace-context.js'
import { createJsonLogger } from '../../src/log/logger.js'
import { request } from '../helpers/http.js'
import { startService } from '../helpers/service.js'
import { sendOverSocket } from '../helpers/socket-http.js'

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'
const PARENT = '00f067aa0ba902b7'
const VALID = `00-${TRACE}-${PARENT}-01`

describe('readTraceId (W3C Trace Context traceparent)', () => {
  it('takes the trace id of a valid version 00 header, whatever the flags', () => {
    assert.equal(readTraceId(VALID), TRACE)
    assert.equal(readTraceId(`00-${TRACE}-${PARENT}-00`), TRACE)
    assert.equal(readTraceId(`00-${TRACE}-${PARENT}-ff`), TRACE)
  })

  it('reads a later version by the rules of 00, with more fields only after a dash', () => {
    assert.equal(readTraceId(`01-${TRACE}-${PARENT}-01`), TRACE)
    assert.equal(readTraceId(`cc-${TRACE}-${PARENT}-01-what-the-future-holds`), TRACE)
    assert.equal(readTraceId(`cc-${TRACE}-${PARENT}-01x`), undefined)
  })

  const malformed: Record<string, string | string[] | undefined> = {
    missing: undefined,
    empty: '',
    'repeated (joined by Node)': `${VALID}, ${VALID}`,
    'an array': [VALID],
    'version ff': `ff-${TRACE}-${PARENT}-01`,
    'version 00 with more fields': `${VALID}-extra`,
    'uppercase hex': VALID.toUpperCase(),
    'an all-zero trace id': `00-${'0'.repeat(32)}-${PARENT}-01`,
    'an all-zero parent id': `00-${TRACE}-${'0'.repeat(16)}-01`,
    'a short trace id': `00-${TRACE.slice(1)}-${PARENT}-01`,
    'a long parent id': `00-${TRACE}-${PARENT}0-01`,
    'a non-hex character': `00-${TRACE.slice(0, -1)}g-${PARENT}-01`,
    'one-digit flags': `00-${TRACE}-${PARENT}-1`,
    'wrong separators': `00_${TRACE}_${PARENT}_01`,
    'a one-digit version': `0-${TRACE}-${PARENT}-01`,
  }
  for (const [what, header] of Object.entries(malformed)) {
    it(`ignores a traceparent that is ${what}`, () => {
      assert.equal(readTraceId(header), undefined)
    })
  }
})

describe('traceparent on the request log line', () => {
  const start = async (
    t: TestContext,
  ): Promise<{ url: string; lines: () => Record<string, unknown>[] }> => {
    const written: string[] = []
    const logger = createJsonLogger({
      write: (line) => {
        written.push(line)
      },
    })
    const svc = await startService(t, { logger })
    const lines = (): Record<string, unknown>[] =>
      written
        .map((line) => JSON.parse(line) as Record<string, unknown>)
        .filter((line) => line['msg'] === 'request')
    return { url: svc.url, lines }
  }

  it('writes the trace id of a valid traceparent on the request line', async (t) => {
    const { url, lines } = await start(t)
    const res = await request('GET', `${url}/healthz`, {
      headers: { traceparent: VALID, 'x-request-id': 'traced-1' },
    })
    assert.equal(res.status, 200)
    const line = lines().find((entry) => entry['requestId'] === 'traced-1')
    assert.equal(line?.['traceId'], TRACE)
    assert.equal(line?.['status'], 200)
  })

  it('serves a request with a malformed traceparent as untraced, with no error', async (t) => {
    const { url, lines } = await start(t)
    const bad = [
      `00-${'0'.repeat(32)}-${PARENT}-01`,
      'garbage',
      `${VALID}-extra`,
      VALID.toUpperCase(),
    ]
    for (const [i, traceparent] of bad.entries()) {
      const res = await request('GET', `${url}/healthz`, {
        headers: { traceparent, 'x-request-id': `bad-${i}` },
      })
      assert.equal(res.status, 200, traceparent)
      assert.equal(res.text, '{"status":"ok"}')
    }
    const untraced = lines().filter((entry) => String(entry['requestId']).startsWith('bad-'))
    assert.equal(untraced.length, bad.length)
    for (const line of untraced) assert.equal('traceId' in line, false, JSON.stringify(line))
  })

  it('ignores two traceparent headers on one request', async (t) => {
    const { url, lines } = await start(t)
    // The head goes on the wire as given: the CRLF inside makes two traceparent lines.
    const answer = await sendOverSocket(url, {
      method: 'GET',
      target: '/healthz',
      headers: { 'x-request-id': 'twice', traceparent: `${VALID}\r\ntraceparent: ${VALID}` },
    })
    assert.equal(answer.status, 200)
    const line = lines().find((entry) => entry['requestId'] === 'twice')
    assert.notEqual(line, undefined)
    assert.equal(line !== undefined && 'traceId' in line, false)
  })
})
