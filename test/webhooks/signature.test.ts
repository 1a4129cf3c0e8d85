import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { Webhook } from 'standardwebhooks'

import { newSecret, sign, signatureHeader } from '../../src/webhooks/signature.js'

const BODY =
  '{"type":"user.created","timestamp":"2026-11-22T10:00:00.000Z","data":{"id":"000000000000042a"}}'

/** What a receiver using the Standard Webhooks reference library does with a delivery. */
function verify(
  secret: string,
  id: string,
  timestamp: number,
  body: string,
  signature: string,
): unknown {
  return new Webhook(secret).verify(body, {
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signature,
  })
}

describe('newSecret', () => {
  it('is whsec_ and the padded standard base64 of 32 random bytes', () => {
    const secret = newSecret()
    assert.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/)
    assert.equal(Buffer.from(secret.slice(6), 'base64').length, 32)
  })

  it('differs every time', () => {
    const secrets = new Set(Array.from({ length: 200 }, () => newSecret()))
    assert.equal(secrets.size, 200)
  })

  it('is accepted by the reference library', () => {
    assert.doesNotThrow(() => new Webhook(newSecret()))
  })
})

describe('sign', () => {
  it('makes the signature the reference library makes and verifies', () => {
    const secret = newSecret()
    const now = Math.floor(Date.now() / 1000)
    const signature = sign(secret, 'msg_000000000000042a', now, BODY)
    assert.match(signature, /^v1,[A-Za-z0-9+/]{43}=$/)
    assert.equal(
      signature,
      new Webhook(secret).sign('msg_000000000000042a', new Date(now * 1000), BODY),
    )
    assert.deepEqual(verify(secret, 'msg_000000000000042a', now, BODY, signature), JSON.parse(BODY))
  })

  it('signs the body as UTF-8 bytes, given as text or as bytes', () => {
    const secret = newSecret()
    const now = Math.floor(Date.now() / 1000)
    const body = '{"data":{"name":"Zoë 😀"}}'
    const signature = sign(secret, 'msg_1', now, Buffer.from(body))
    assert.equal(signature, sign(secret, 'msg_1', now, body))
    assert.doesNotThrow(() => verify(secret, 'msg_1', now, body, signature))
  })

  it('covers the id, the timestamp and the body: a change in any fails verification', () => {
    const secret = newSecret()
    const now = Math.floor(Date.now() / 1000)
    const signature = sign(secret, 'msg_1', now, BODY)
    assert.throws(() => verify(secret, 'msg_2', now, BODY, signature))
    assert.throws(() => verify(secret, 'msg_1', now + 1, BODY, signature))
    assert.throws(() => verify(secret, 'msg_1', now, `${BODY} `, signature))
    assert.throws(() => verify(newSecret(), 'msg_1', now, BODY, signature))
  })
})

describe('signatureHeader', () => {
  it('signs with the current secret first and the previous one after it, space separated', () => {
    const current = newSecret()
    const previous = newSecret()
    const now = Math.floor(Date.now() / 1000)
    const header = signatureHeader([current, previous], 'msg_7', now, BODY)
    const parts = header.split(' ')
    assert.deepEqual(parts, [sign(current, 'msg_7', now, BODY), sign(previous, 'msg_7', now, BODY)])
    // A receiver holding either secret verifies the delivery: a rotation needs no downtime.
    assert.doesNotThrow(() => verify(current, 'msg_7', now, BODY, header))
    assert.doesNotThrow(() => verify(previous, 'msg_7', now, BODY, header))
    assert.throws(() => verify(newSecret(), 'msg_7', now, BODY, header))
  })

  it('is one signature with one secret', () => {
    const secret = newSecret()
    const header = signatureHeader([secret], 'msg_7', 1_800_000_000, BODY)
    assert.equal(header, sign(secret, 'msg_7', 1_800_000_000, BODY))
    assert.ok(!header.includes(' '))
  })
})
