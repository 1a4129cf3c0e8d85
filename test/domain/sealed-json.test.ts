import assert from 'node:assert/strict'
import { createHmac, randomBytes } from 'node:crypto'
import { describe, it } from 'node:test'

import { createSealedJson } from '../../src/domain/sealed-json.js'

const SECRET = randomBytes(32)
const PURPOSE = 'a test purpose'

/** A seal made as the module makes one, over any payload text (valid JSON or not). */
function sealText(payloadText: string, purpose = PURPOSE): string {
  const key = createHmac('sha256', SECRET).update(purpose).digest()
  const payload = Buffer.from(payloadText).toString('base64url')
  return `${payload}.${createHmac('sha256', key).update(payload).digest('base64url')}`
}

describe('sealed JSON', () => {
  const sealed = createSealedJson(SECRET, PURPOSE)

  it('opens what it sealed, any JSON value', () => {
    for (const value of [[1, 'a', 'b'], { a: [null, true] }, 'text', 0, null]) {
      assert.deepEqual(sealed.open(sealed.seal(value)), value)
    }
    assert.equal(sealed.seal([1]), sealText('[1]'))
  })

  it('opens nothing of another secret or another purpose', () => {
    const text = sealed.seal([1])
    assert.equal(createSealedJson(randomBytes(32), PURPOSE).open(text), undefined)
    assert.equal(createSealedJson(SECRET, `${PURPOSE} v2`).open(text), undefined)
    assert.equal(sealed.open(sealText('[1]', '')), undefined)
  })

  it('opens nothing that is not one payload and one signature', () => {
    const text = sealed.seal([1])
    const [payload = '', signature = ''] = text.split('.')
    for (const bad of [
      '',
      payload,
      `${payload}.`,
      `.${signature}`,
      `${text}.`,
      `${text}.${signature}`,
    ]) {
      assert.equal(sealed.open(bad), undefined, JSON.stringify(bad))
    }
  })

  it('opens nothing whose payload or signature was changed, in any spelling', () => {
    const text = sealed.seal({ id: 'a' })
    const [payload = '', signature = ''] = text.split('.')
    const other = Buffer.from('{"id":"b"}').toString('base64url')
    for (const bad of [
      `${other}.${signature}`,
      `${payload}.${signature.slice(0, -1)}`,
      `${payload}.${signature.slice(0, -2)}`,
      `${payload}.${signature}A`,
      `${payload}.${signature}=`,
      `${payload}.${signature.replaceAll('-', '+').replaceAll('_', '/')}x`,
      `${payload}.${Buffer.from(signature, 'base64url').toString('base64')}`,
    ]) {
      if (bad === text) continue
      assert.equal(sealed.open(bad), undefined, bad)
    }
  })

  it('opens nothing whose signed payload is not JSON', () => {
    assert.equal(sealed.open(sealText('not json')), undefined)
    assert.equal(sealed.open(sealText('')), undefined)
  })
})
