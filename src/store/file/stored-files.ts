import { copyMetadata, keepKeyOrder, type Metadata } from '../../domain/metadata.js'
import type { Tombstone } from '../../domain/tombstone.js'
import { isUserStatus, type User } from '../../domain/user.js'
import { isCanonicalUuid } from '../../domain/uuid7.js'

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

/** The text of a tombstone file, in the key order the reader expects. */
export function toTombstoneJson(tombstone: Tombstone): string {
  return JSON.stringify({ id: tombstone.id, deletedAt: tombstone.deletedAt })
}

/**
 * Reads a user file written by the store. Returns undefined for anything that is not a whole,
 * well-formed user (a torn or hand-edited file), which the store then quarantines.
 */
export function parseStoredUser(text: string, expectedId: string): User | undefined {
  const value = parseOwnObject(text, expectedId)
  if (value === undefined) return undefined
  keepKeyOrder(text, value, ['metadata'])
  return toUser(value, expectedId)
}

/** Reads a tombstone file: exactly `{"id","deletedAt"}`; undefined for anything else. */
export function parseTombstone(text: string, expectedId: string): Tombstone | undefined {
  const value = parseOwnObject(text, expectedId)
  if (value === undefined || Object.keys(value).length !== 2) return undefined
  const deletedAt = value['deletedAt']
  return typeof deletedAt === 'string' && TIMESTAMP.test(deletedAt)
    ? { id: expectedId, deletedAt }
    : undefined
}

/** The JSON object of a file named after `expectedId`, when it says it is that id. */
function parseOwnObject(text: string, expectedId: string): Record<string, unknown> | undefined {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return undefined
  }
  if (!isRecord(value) || value['id'] !== expectedId || !isCanonicalUuid(expectedId))
    return undefined
  return value
}

function toUser(value: Record<string, unknown>, id: string): User | undefined {
  const { email, name, status, metadata, createdAt, updatedAt, version, tokensValidAfter } = value
  if (typeof email !== 'string' || typeof name !== 'string' || !isUserStatus(status))
    return undefined
  if (typeof createdAt !== 'string' || !TIMESTAMP.test(createdAt)) return undefined
  if (typeof updatedAt !== 'string' || !TIMESTAMP.test(updatedAt)) return undefined
  if (typeof version !== 'number' || !Number.isSafeInteger(version) || version < 1) return undefined
  if (
    tokensValidAfter !== undefined &&
    (typeof tokensValidAfter !== 'string' || !TIMESTAMP.test(tokensValidAfter))
  )
    return undefined
  const cleanMetadata = toMetadata(metadata)
  if (cleanMetadata === undefined) return undefined
  // Equal time stamps share one string: 100,000 users loaded at start add up.
  return {
    id,
    email,
    name,
    status,
    metadata: cleanMetadata,
    createdAt,
    updatedAt: updatedAt === createdAt ? createdAt : updatedAt,
    version,
    ...(tokensValidAfter === undefined ? {} : { tokensValidAfter }),
  }
}

/**
 * Metadata as a user file holds it: an object of strings, copied to a null-prototype object in
 * the key order kept for it (keepKeyOrder).
 */
export function toMetadata(value: unknown): Metadata | undefined {
  return isRecord(value) ? copyMetadata(value) : undefined
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
