import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { LineReader, NOT_UTF8, type SplitLine, TOO_LONG } from '../../src/users/import-lines.js'

/** Every line the reader gives now. */
function drain(reader: LineReader): SplitLine[] {
  const lines: SplitLine[] = []
  for (let line = reader.next(); line !== undefined; line = reader.next()) lines.push(line)
  return lines
}

describe('LineReader', () => {
  it('gives one line at a time across chunk boundaries, and the last line without a newline at the end', () => {
    const reader = new LineReader(100)
    reader.push(Buffer.from('ab'))
    assert.equal(reader.next(), undefined)
    reader.push(Buffer.from('c\nde\n\nf'))
    assert.equal(reader.buffered, 7, 'bytes pushed and not yet taken')
    assert.deepEqual(drain(reader), ['abc', 'de', ''])
    assert.equal(reader.buffered, 0, 'the start of the last line is taken, waiting for its end')
    assert.equal(reader.done, false)
    reader.push(Buffer.from('g'))
    reader.end()
    assert.deepEqual(drain(reader), ['fg'])
    assert.equal(reader.done, true)
    assert.equal(reader.buffered, 0)
  })

  it('gives nothing more after a body that ends with its newline', () => {
    const reader = new LineReader(100)
    reader.push(Buffer.from('one\ntwo\n'))
    reader.end()
    assert.deepEqual(drain(reader), ['one', 'two'])
    assert.equal(reader.done, true)
  })

  it('drops a line longer than the bound as it is scanned, whatever its chunks, and goes on', () => {
    const reader = new LineReader(8)
    reader.push(Buffer.from('12345'))
    reader.push(Buffer.from('6789'))
    assert.equal(reader.next(), undefined)
    reader.push(Buffer.from('0123\nshort\n12345678\n123456789'))
    reader.end()
    assert.deepEqual(drain(reader), [TOO_LONG, 'short', '12345678', TOO_LONG])
  })

  it('gives the same lines for a body pushed a byte at a time as pushed whole, at and past the bound', () => {
    const max = 200
    const body = Buffer.from(
      [
        'é'.repeat(100), // exactly the bound, in two-byte characters
        `${'x'.repeat(max)}\r`, // the bound and the CR of a CRLF
        'y'.repeat(max + 1), // one byte past it
        `${'z'.repeat(max)}\r\r`, // past it by a CR that ends no line
        'short',
        'w'.repeat(3 * max), // far past it, then a line after it
        'last without a newline',
      ].join('\n'),
    )
    const whole = new LineReader(max)
    whole.push(body)
    whole.end()
    const expected = drain(whole)
    assert.deepEqual(expected.slice(0, 5), [
      'é'.repeat(100),
      `${'x'.repeat(max)}\r`,
      TOO_LONG,
      TOO_LONG,
      'short',
    ])
    const bytewise = new LineReader(max)
    const lines: SplitLine[] = []
    for (const byte of body) {
      bytewise.push(Buffer.of(byte))
      lines.push(...drain(bytewise))
    }
    bytewise.end()
    lines.push(...drain(bytewise))
    assert.deepEqual(lines, expected)
  })

  it('counts the CR of a CRLF toward no bound, however the chunks cut the line', () => {
    const reader = new LineReader(8)
    reader.push(Buffer.from('12345678\r\n1234567'))
    reader.push(Buffer.from('8'))
    reader.push(Buffer.from('\r'))
    reader.push(Buffer.from('\n123456789\r\n12345678\r\r\n12345678\r'))
    reader.end()
    assert.deepEqual(drain(reader), ['12345678\r', '12345678\r', TOO_LONG, TOO_LONG, '12345678\r'])
  })

  it('decodes UTF-8 split between chunks, and refuses a line that is not UTF-8', () => {
    const reader = new LineReader(100)
    const euro = Buffer.from('€')
    reader.push(Buffer.concat([Buffer.from('a'), euro.subarray(0, 1)]))
    reader.push(
      Buffer.concat([
        euro.subarray(1),
        Buffer.from('\n'),
        Buffer.from([0xff, 0x0a]),
        Buffer.from('\uFEFFb\n'),
      ]),
    )
    assert.deepEqual(drain(reader), ['a€', NOT_UTF8, '\uFEFFb'])
  })
})
