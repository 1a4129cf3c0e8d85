import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { repeatedName, repeatedNameDetail } from '../../src/domain/json-text.js'

describe('repeatedName', () => {
  it('finds a name an object holds twice, at any depth, compared as the string it stands for', () => {
    const cases: Array<[string, string]> = [
      ['{"email":"a@x.io","name":"A","email":"b@x.io"}', 'email'],
      ['{"name":"A","metadata":{"k":"1","k":"2"}}', 'k'],
      ['{"a":[{"b":1}],"a":2}', 'a'],
      ['[{"x":1},{"y":[{"z":1,"z":2}]}]', 'z'],
      ['{"a":1,"\\u0061":2}', 'a'],
      ['{"a\\\\":1,"a\\\\":2}', 'a\\'],
      ['{"\\"":1,"\\"":2}', '"'],
      ['{ "a" : 1 ,\n "a" : 2 }', 'a'],
      ['{"":1,"":2}', ''],
    ]
    for (const [text, name] of cases) {
      JSON.parse(text)
      assert.equal(repeatedName(text), name, text)
    }
  })

  it('finds none where every object names each member once', () => {
    const cases = [
      '{"email":"a@x.io","name":"A","metadata":{"email":"b","name":"c"}}',
      '[{"a":1},{"a":2},{"a":3}]',
      '{"a":[1,"b",{"c":"d"}],"b":2,"c":3}',
      '{"a":"\\"a\\":1,","b":"{\\"b\\":[}"}',
      '{"a":"\\\\","b":"\\\\\\""}',
      '{"a":1,"\\u0062":2}',
      '{"A":1,"a":2}',
      '"a"',
      '[]',
      '{}',
      '17',
    ]
    for (const text of cases) {
      JSON.parse(text)
      assert.equal(repeatedName(text), undefined, text)
    }
  })

  it('walks an object of 8,000 names once, and finds the repeat at its end', () => {
    const names = Array.from({ length: 8000 }, (_, i) => `"n${i}":${i}`)
    const distinct = `{${names.join(',')}}`
    assert.equal(repeatedName(distinct), undefined)
    assert.equal(repeatedName(`{${names.join(',')},"n0":0}`), 'n0')
  })

  it('says which name, cut to 64 characters, as JSON text', () => {
    assert.match(repeatedNameDetail('email'), /^The JSON has the name "email" twice in one object/)
    const long = repeatedNameDetail(`${'x'.repeat(100)}\u0000`)
    assert.ok(long.includes(`"${'x'.repeat(64)}…"`), long)
    assert.ok(!long.includes('\u0000'))
  })
})
