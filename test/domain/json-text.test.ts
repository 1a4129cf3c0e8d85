import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { namesInTextOrder, valueText } from '../../src/domain/json-text.js'

describe('namesInTextOrder', () => {
  it('gives the names of the object at a path in text order, index-like names where written', () => {
    const text =
      ' { "x" : [1, {"9":"no"}], "metadata" : { "b" : "1", "9":"x", "a\\u0062":"\\"}", "1":"y" } } '
    assert.deepEqual(namesInTextOrder(text, ['metadata']), ['b', '9', 'ab', '1'])
    assert.deepEqual(namesInTextOrder(text, []), ['x', 'metadata'])
  })

  it('follows the last of a name given twice, as JSON.parse does, and lists a repeated name once', () => {
    const text = '{"m":{"1":"a"},"m":{"b":"1","2":"x","b":"2"}}'
    assert.deepEqual(namesInTextOrder(text, ['m']), ['b', '2'])
  })

  it('is undefined where there is no object', () => {
    assert.equal(namesInTextOrder('{"m":"text"}', ['m']), undefined)
    assert.equal(namesInTextOrder('{"m":{}}', ['n']), undefined)
    assert.equal(namesInTextOrder('[{"m":{}}]', ['m']), undefined)
    assert.deepEqual(namesInTextOrder('{"m":{}}', ['m']), [])
  })
})

describe('valueText', () => {
  it('gives a member value as written', () => {
    const text = '{"actor":"a \\"user\\": {","n":-1.5e3,"user":{"metadata":{"9":"}","1":"y"}}}'
    assert.equal(valueText(text, ['user']), '{"metadata":{"9":"}","1":"y"}}')
    assert.equal(valueText(text, ['n']), '-1.5e3')
    assert.equal(valueText(text, ['none']), undefined)
  })
})
