import { isObject, namesInTextOrder } from './json-text.js'

/**
 * Metadata: string keys to string values, held in a null-prototype object, in the order the
 * client gave them. Keys that are array indices ("0", "12") come first in every JS object: for
 * such metadata the order is kept beside the object, and metadataKeys and metadataJson read it.
 */
export type Metadata = Readonly<Record<string, string>>

/** Metadata of a user that has none: one shared, frozen object instead of one per user. */
export const EMPTY_METADATA: Metadata = Object.freeze(Object.create(null) as Record<string, string>)

// Only objects with an index-like key are here (JS would list it first): most metadata never is.
const KEY_ORDERS = new WeakMap<object, readonly string[]>()

const INDEX_KEY = /^(?:0|[1-9][0-9]{0,9})$/
const MAX_INDEX = 2 ** 32 - 2

/** Whether JS puts this key ahead of the others in any object: an array index, written canonically. */
export function isIndexKey(key: string): boolean {
  return INDEX_KEY.test(key) && Number(key) <= MAX_INDEX
}

/** Whether an object has a key that JS moves ahead of the others (then always its first key). */
export function hasIndexKey(value: object): boolean {
  for (const key in value) return isIndexKey(key)
  return false
}

/** The keys of metadata (or of an object read from JSON text) in their kept order. */
export function metadataKeys(metadata: object): readonly string[] {
  return KEY_ORDERS.get(metadata) ?? Object.keys(metadata)
}

/** Metadata of these entries, in the map's order. */
export function toMetadata(entries: ReadonlyMap<string, string>): Metadata {
  if (entries.size === 0) return EMPTY_METADATA
  const metadata = Object.create(null) as Record<string, string>
  let moved = false
  for (const [key, value] of entries) {
    metadata[key] = value
    moved ||= isIndexKey(key)
  }
  if (moved) KEY_ORDERS.set(metadata, [...entries.keys()])
  return metadata
}

/**
 * An object of strings read from JSON (a file, a row, a line) as metadata: a null-prototype copy
 * in the same key order; undefined when a value is not a string.
 */
export function copyMetadata(value: Readonly<Record<string, unknown>>): Metadata | undefined {
  const order = KEY_ORDERS.get(value)
  const keys = order ?? Object.keys(value)
  if (keys.length === 0) return EMPTY_METADATA
  const metadata = Object.create(null) as Record<string, string>
  for (const key of keys) {
    const item = value[key]
    if (typeof item !== 'string') return undefined
    metadata[key] = item
  }
  if (order !== undefined) KEY_ORDERS.set(metadata, order)
  return metadata
}

/**
 * Keeps the text's key order of the object at `path` in `value`, which JSON.parse made of `text`:
 * needed only when the object has a key JSON.parse moved ahead, so most calls cost one check.
 */
export function keepKeyOrder(text: string, value: unknown, path: readonly string[]): void {
  let target = value
  for (const name of path) target = isObject(target) ? target[name] : undefined
  if (!isObject(target) || !hasIndexKey(target)) return
  const names = namesInTextOrder(text, path)
  if (names !== undefined) KEY_ORDERS.set(target, names)
}

/**
 * Metadata from JSON text that the service wrote (a database's json column), its order kept; the
 * object JSON.parse made, whose keys (`__proto__` included) are own data properties.
 */
export function parseMetadata(text: string): Metadata | undefined {
  const value: unknown = JSON.parse(text)
  if (!isObject(value)) return undefined
  keepKeyOrder(text, value, [])
  return value as Metadata
}

/** The JSON text of metadata, keys in their kept order. */
export function metadataJson(metadata: Metadata): string {
  const order = KEY_ORDERS.get(metadata)
  if (order === undefined) return JSON.stringify(metadata)
  const members = order.map((key) => `${JSON.stringify(key)}:${JSON.stringify(metadata[key])}`)
  return `{${members.join(',')}}`
}

/** Whether metadata needs metadataJson: JSON.stringify would write its keys in another order. */
export function hasKeyOrder(metadata: Metadata): boolean {
  return KEY_ORDERS.has(metadata)
}

/** Same keys, in the same order, with the same values: a reorder is a change. */
export function sameMetadata(a: Metadata, b: Metadata): boolean {
  if (a === b) return true
  const keys = metadataKeys(a)
  const others = metadataKeys(b)
  if (keys.length !== others.length) return false
  return keys.every((key, i) => others[i] === key && a[key] === b[key])
}
