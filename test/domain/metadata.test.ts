import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { eventJson, parseEvent } from '../../src/domain/event.js'
import { isIndexKey } from '../../src/domain/metadata.js'
import { toRecord } from '../../src/domain/user.js'
import { UserLines } from '../../src/store/file/snapshot-lines.js'
import { parseStoredUser } from '../../src/store/file/stored-files.js'
import { makeUser } from '../helpers/store-users.js'

/**
 * What a file store reads back at start (a user file, a snapshot line, an event replayed from its
 * log) keeps the metadata's key order, index-like keys included: each is written again from what
 * was read, and a later change compares against it.
 */

const ORDERED = '{"b":"1","a":"2","9":"x","__proto__":"p","1":"y"}'

/** A user's JSON as the store writes it, with metadata in ORDERED's order. */
function storedJson(): { id: string; json: string } {
  const plain = makeUser()
  const json = toRecord(plain).json.replace('"metadata":{}', `"metadata":${ORDERED}`)
  return { id: plain.id, json }
}

describe('metadata read back by the file store', () => {
  it('keeps the order of a user file, so that its record writes the same JSON', () => {
    const { id, json } = storedJson()
    const user = parseStoredUser(json, id)
    assert.ok(user !== undefined)
    assert.equal(toRecord(user).json, json)
  })

  it('keeps the order of a snapshot line, so that its user writes the same JSON', () => {
    const { json } = storedJson()
    const record = new UserLines(`${json}\n`).next()
    assert.ok(record !== undefined)
    assert.equal(toRecord(record.user).json, json)
  })

  it('keeps the order of an event replayed from the log', () => {
    const { id, json } = storedJson()
    const text = eventJson({
      id: '0000000000000001',
      type: 'user.created',
      time: '2026-01-01T00:00:00.000Z',
      userId: id,
      version: 1,
      actor: 'a "user": {"9":"x"}',
      userJson: json,
    })
    assert.equal(parseEvent(text)?.userJson, json)
  })
})

describe('isIndexKey', () => {
  it('names the keys JS lists first: array indices up to 2^32 - 2, written canonically', () => {
    const keys = ['a', '4294967295', '4294967294', '99999999999', '01', '0', '1e3', '-1', '7']
    const listed = Object.keys(Object.fromEntries(keys.map((key) => [key, ''])))
    assert.deepEqual(listed.slice(0, 3), ['0', '7', '4294967294'])
    assert.deepEqual(keys.filter(isIndexKey), ['4294967294', '0', '7'])
  })
})
