/*
 * A small JSON Schema (2020-12) check for the OpenAPI document's schemas, with a message per
 * mismatch, so that a test can say where a real answer breaks its declared schema. It knows the
 * keywords the document uses (KNOWN_KEYWORDS, which a test holds the document to) and the formats
 * uuid and date-time as RFC 3339 and Ajv read them.
 */

export type Json = Record<string, unknown>

export function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** A `$ref` into the document resolved, any other schema as it is. */
export function resolve(doc: Json, schema: unknown): Json {
  if (!isObject(schema)) return {}
  const ref = schema['$ref']
  if (typeof ref !== 'string') return schema
  let found: unknown = doc
  for (const key of ref.slice(2).split('/')) found = isObject(found) ? found[key] : undefined
  return resolve(doc, found)
}

/** Keywords that only annotate: they constrain nothing. */
const ANNOTATIONS = ['description', 'examples', 'default', 'readOnly', 'writeOnly', 'title']

/** Every keyword schemaErrors checks or may ignore; a schema with another one is not checked. */
export const KNOWN_KEYWORDS: ReadonlySet<string> = new Set([
  ...ANNOTATIONS,
  ...['$ref', 'type', 'enum', 'const', 'allOf', 'anyOf', 'oneOf', 'format'],
  ...['minLength', 'maxLength', 'pattern', 'minimum', 'maximum'],
  ...['properties', 'required', 'additionalProperties', 'propertyNames', 'maxProperties'],
  ...['minProperties', 'items', 'minItems', 'maxItems', 'uniqueItems'],
])

const codePoints = (text: string): number => [...text].length

function typeOf(value: unknown): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'array'
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number'
  return typeof value
}

const show = (value: unknown): string => JSON.stringify(value)?.slice(0, 80) ?? String(value)

/**
 * RFC 3339 date-time (section 5.6), with a real day of its month and a time zone, as Ajv's
 * `date-time` format reads it (a leap second only at 23:59:60).
 */
export function isDateTime(text: string): boolean {
  const match =
    /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-](\d{2}):(\d{2}))$/.exec(
      text,
    )
  if (match === null) return false
  const [year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0] = match
    .slice(1, 7)
    .map(Number)
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0)
  const days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
  if (days === undefined || day < 1 || day > days) return false
  if (hour > 23 || minute > 59 || second > 60) return false
  const [zoneHour, zoneMinute] = [Number(match[9] ?? 0), Number(match[10] ?? 0)]
  return zoneHour <= 23 && zoneMinute <= 59
}

// Ajv's `uuid` format: any case, as RFC 9562 allows.
const UUID = /^[0-9a-f]{8}-(?:[0-9a-f]{4}-){3}[0-9a-f]{12}$/i

/** Every way `value` breaks `schema`, each as `<pointer>: <what>`; none when it meets it. */
export function schemaErrors(doc: Json, rawSchema: unknown, value: unknown, at = ''): string[] {
  const schema = resolve(doc, rawSchema)
  const unknown = Object.keys(schema).filter((key) => !KNOWN_KEYWORDS.has(key))
  if (unknown.length > 0) return [`${at}: the check does not know ${unknown.join(', ')}`]
  const type = schema['type']
  if (type !== undefined) {
    const types = Array.isArray(type) ? type : [type]
    const actual = typeOf(value)
    if (!types.includes(actual) && !(actual === 'integer' && types.includes('number')))
      return [`${at}: ${show(value)} is not of type ${types.join(' or ')}`]
  }
  const errors: string[] = []
  const choices = schema['enum']
  if (Array.isArray(choices) && !choices.includes(value))
    errors.push(`${at}: ${show(value)} is not one of ${show(choices)}`)
  if ('const' in schema && schema['const'] !== value)
    errors.push(`${at}: ${show(value)} is not ${show(schema['const'])}`)
  for (const part of arrayOf(schema['allOf'])) errors.push(...schemaErrors(doc, part, value, at))
  const anyOf = arrayOf(schema['anyOf'])
  if (anyOf.length > 0 && !anyOf.some((part) => schemaErrors(doc, part, value, at).length === 0))
    errors.push(`${at}: ${show(value)} meets none of anyOf`)
  const oneOf = arrayOf(schema['oneOf'])
  const met = oneOf.filter((part) => schemaErrors(doc, part, value, at).length === 0).length
  if (oneOf.length > 0 && met !== 1) errors.push(`${at}: ${show(value)} meets ${met} of oneOf`)
  if (typeof value === 'string') errors.push(...stringErrors(schema, value, at))
  if (typeof value === 'number') errors.push(...numberErrors(schema, value, at))
  if (Array.isArray(value)) errors.push(...arrayErrors(doc, schema, value, at))
  if (isObject(value)) errors.push(...objectErrors(doc, schema, value, at))
  return errors
}

function arrayOf(value: unknown): unknown[] {
  return Array.isArray(value) ? value : []
}

function stringErrors(schema: Json, value: string, at: string): string[] {
  const { minLength, maxLength, pattern, format } = schema
  const errors: string[] = []
  if (typeof minLength === 'number' && codePoints(value) < minLength)
    errors.push(`${at}: ${show(value)} is shorter than ${minLength}`)
  if (typeof maxLength === 'number' && codePoints(value) > maxLength)
    errors.push(`${at}: ${show(value)} is longer than ${maxLength}`)
  if (typeof pattern === 'string' && !new RegExp(pattern, 'u').test(value))
    errors.push(`${at}: ${show(value)} does not match ${pattern.slice(0, 60)}`)
  if (format === 'uuid' && !UUID.test(value)) errors.push(`${at}: ${show(value)} is not a uuid`)
  if (format === 'date-time' && !isDateTime(value))
    errors.push(`${at}: ${show(value)} is not a date-time`)
  return errors
}

function numberErrors(schema: Json, value: number, at: string): string[] {
  const { minimum, maximum } = schema
  const errors: string[] = []
  if (typeof minimum === 'number' && value < minimum)
    errors.push(`${at}: ${value} is below ${minimum}`)
  if (typeof maximum === 'number' && value > maximum)
    errors.push(`${at}: ${value} is above ${maximum}`)
  return errors
}

function arrayErrors(doc: Json, schema: Json, value: unknown[], at: string): string[] {
  const { minItems, maxItems, uniqueItems, items } = schema
  const errors: string[] = []
  if (typeof minItems === 'number' && value.length < minItems)
    errors.push(`${at}: ${value.length} items, fewer than ${minItems}`)
  if (typeof maxItems === 'number' && value.length > maxItems)
    errors.push(`${at}: ${value.length} items, more than ${maxItems}`)
  if (
    uniqueItems === true &&
    new Set(value.map((item) => JSON.stringify(item))).size < value.length
  )
    errors.push(`${at}: items are not unique`)
  if (items !== undefined)
    for (const [i, item] of value.entries())
      errors.push(...schemaErrors(doc, items, item, `${at}/${i}`))
  return errors
}

function objectErrors(doc: Json, schema: Json, value: Json, at: string): string[] {
  const properties = isObject(schema['properties']) ? schema['properties'] : {}
  const { maxProperties, minProperties, propertyNames, additionalProperties } = schema
  const keys = Object.keys(value)
  const errors: string[] = []
  for (const name of arrayOf(schema['required']))
    if (typeof name === 'string' && !(name in value)) errors.push(`${at}: lacks ${name}`)
  if (typeof maxProperties === 'number' && keys.length > maxProperties)
    errors.push(`${at}: ${keys.length} members, more than ${maxProperties}`)
  if (typeof minProperties === 'number' && keys.length < minProperties)
    errors.push(`${at}: ${keys.length} members, fewer than ${minProperties}`)
  for (const key of keys) {
    const where = `${at}/${key}`
    if (propertyNames !== undefined && schemaErrors(doc, propertyNames, key, where).length > 0)
      errors.push(`${where}: the name is not allowed`)
    if (Object.hasOwn(properties, key))
      errors.push(...schemaErrors(doc, properties[key], value[key], where))
    else if (additionalProperties === false) errors.push(`${where}: not allowed`)
    else if (additionalProperties !== undefined)
      errors.push(...schemaErrors(doc, additionalProperties, value[key], where))
  }
  return errors
}
