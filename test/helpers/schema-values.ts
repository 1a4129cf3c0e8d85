/*
 * What a request generator needs of an OpenAPI document, in the way schemathesis and
 * hypothesis-jsonschema work: candidate values, many of them deliberately at or past an edge, and
 * a JSON Schema check that keeps only the ones a schema allows. A schema that allows more than the
 * service takes lets such a candidate through, and the service's 400 or 422 shows it.
 */

import { isObject, type Json, resolve, schemaErrors } from './schema-check.js'

export { isObject, type Json, resolve }

/** Whether `value` meets `schema` (schema-check.ts: the keywords the document uses, and formats). */
export function allows(doc: Json, schema: unknown, value: unknown): boolean {
  return schemaErrors(doc, schema, value).length === 0
}

const UUID = '0193a5f2-7c1e-7d3a-9b2f-1c2d3e4f5a6b'
const uuid = (n: number): string => `0193a5f2-7c1e-7d3a-9b2f-${n.toString(16).padStart(12, '0')}`
/** Ways to surround a value that engines count as white space differently. */
const SPACES = [' ', '\t', '\u00A0', '\u3000', '\uFEFF', '\u0085', '\u001C', '\u200B']

/** Text candidates: the schema's own values, each wrapped and cut, and a corpus of edges. */
export function stringCandidates(schema: Json): string[] {
  const own = [
    ...(Array.isArray(schema['enum']) ? schema['enum'] : []),
    ...(Array.isArray(schema['examples']) ? schema['examples'] : []),
    schema['default'],
  ].filter((value): value is string => typeof value === 'string')
  const lengths = [schema['minLength'], schema['maxLength']].filter(
    (value): value is number => typeof value === 'number',
  )
  const sized = lengths.flatMap((n) =>
    [n - 1, n, n + 1].filter((m) => m >= 0).flatMap((m) => ['a'.repeat(m), '😀'.repeat(m)]),
  )
  const hex = ['0000000000000000', '0000000000000001', '7fffffffffffffff', '8000000000000000']
  const corpus = [
    '',
    ' ',
    'a',
    'zzz',
    'a\u0000b',
    '\u200B',
    UUID,
    UUID.toUpperCase(),
    `${UUID},${uuid(2)}`,
    ` ${UUID} , ${uuid(2)} `,
    `${UUID},`,
    Array.from({ length: 100 }, (_, n) => uuid(n)).join(','),
    Array.from({ length: 101 }, (_, n) => uuid(n)).join(','),
    ...hex,
    'ffffffffffffffff',
    '7FFFFFFFFFFFFFFF',
    '"v1"',
    'W/"v1"',
    '*',
  ]
  const values = [...own, ...sized, ...corpus]
  const lists = own.length > 1 ? [own.join(','), ` ${own.slice(0, 2).join(' , ')} `] : []
  const varied = own.flatMap((value) => [
    ...SPACES.flatMap((space) => [`${space}${value}`, `${value}${space}`]),
    value.toUpperCase(),
    `${value},`,
    value.slice(1),
  ])
  return [...new Set([...values, ...lists, ...varied])]
}

/** Email candidates: the rule's edges (lengths, dots, invisible and control characters). */
export function emailCandidates(): string[] {
  return [
    'ada@example.com',
    ' ada@example.com ',
    '\u00A0ada@example.com\u3000',
    '\uFEFFada@example.com',
    'zoë@example.com',
    'a..b@example.com',
    'v@io',
    'a@b.c',
    'a@b',
    'a b@c.co',
    'a@b@c.co',
    'A@EXAMPLE.COM',
    '\u200B@b.co',
    'a@\u200B.co',
    'a\u0085@b.co',
    'a\u001C@b.co',
    'a\u0000@b.co',
    '😀@b.co',
    `${'l'.repeat(64)}@b.co`,
    `${'l'.repeat(65)}@b.co`,
    `a@${'d'.repeat(248)}.co`,
    `a@${'d'.repeat(249)}.co`,
    '\u3164@b.co',
  ]
}

/** Name candidates: lengths in code points, white space, invisible and control characters. */
export function nameCandidates(): string[] {
  return [
    'Ada',
    ' Ada ',
    '\tAda\n',
    'a'.repeat(200),
    'a'.repeat(201),
    '😀'.repeat(200),
    '😀'.repeat(201),
    ` ${'a'.repeat(200)} `,
    '',
    ' ',
    '\u200B',
    '\u3164',
    'A\u200B',
    'A\nB',
    'A\u0085B',
    'A\u007FB',
    'A\u00A0B',
    'Ada\uFEFF',
    '\u115F\u1160',
  ]
}

/** Idempotency-Key candidates: a String at its length edges, lists, parameters, other items. */
export function idempotencyKeyCandidates(): string[] {
  return [
    `"${UUID}"`,
    `"${'k'.repeat(255)}"`,
    `"${'k'.repeat(256)}"`,
    `"${'\\"'.repeat(255)}"`,
    `"${'\\"'.repeat(256)}"`,
    '"a", "b"',
    '"a","b"',
    '"k";v=1',
    '"k";v=1.5;w=?0;x=:aGk=:;y=@1;z=%"%c3%a9"',
    '"k";v=%"%ff"',
    '"k";v=1.2345',
    '"k"x',
    '"zoë"',
    'k',
    '?1',
  ]
}

/** Metadata candidates: key and value edges, counts, prototype keys, nulls (for a merge patch). */
export function metadataCandidates(): unknown[] {
  const keys = (count: number): Json =>
    Object.fromEntries(Array.from({ length: count }, (_, n) => [`k${n}`, 'v']))
  return [
    {},
    { team: 'engines' },
    JSON.parse('{"__proto__":"x","constructor":"y"}'),
    { ['k'.repeat(64)]: 'v'.repeat(512) },
    { ['k'.repeat(65)]: 'v' },
    { 'a b': 'v' },
    { '': 'v' },
    { k: 'v'.repeat(513) },
    { k: '😀'.repeat(512) },
    { k: 'a\u0000b' },
    { k: '\uD800' },
    { k: 1 },
    keys(32),
    keys(33),
    null,
    { k: null },
  ]
}

export { UUID, uuid }
