import { createHash } from 'node:crypto'

import type { KeptAnswer, KeptKey } from '../../domain/kept-key.js'
import { keyName } from '../memory-keys.js'
import type { LineStart } from './event-append.js'
import { safeId } from './event-segments.js'

/** How a key's line in the event log starts (KEY_LINE_START's bytes, read as latin1). */
export const KEY_LINE_START = '{"key":'
/** What follows the key's JSON in its log line, before its event's id. */
export const KEY_LINE_FOR_START = ',"for":"'
/** The event id a key line ends with: its event's, whose line follows it in the same append. */
const KEY_LINE_FOR = /,"for":"([0-9a-f]{16})"\}$/
/** A journal line's end: where the log's copy of the key is (`<tab><segment file>:<offset>`). */
const JOURNAL_COPY = /\t([0-9a-f]{16}\.ndjson):(\d{1,15})$/
const TAB = 0x09

/** Where the event log holds a copy of a kept key: its key line's segment file and byte offset. */
export type LogCopy = LineStart

/** The name a subject's key is kept under: the SHA-256 of the subject and key, in hex. */
export function keyDigest(subject: string, key: string): string {
  return createHash('sha256').update(keyName(subject, key)).digest('hex')
}

/** A kept key as JSON, in a fixed key order: its journal line and its event log line carry it. */
export function keptKeyJson(kept: KeptKey): string {
  return JSON.stringify(plainKey(kept))
}

/**
 * The key's line in the event log, newline included, from its JSON (keptKeyJson):
 * written in the same append as its event's line, just before it, and counted only when that
 * line follows it whole and is not voided.
 */
export function keyLine(keyJson: string, eventId: string): string {
  return `{"key":${keyJson},"for":"${eventId}"}\n`
}

/**
 * A journal line, newline included: the key's name (keyDigest), a space, its JSON, then, for a key
 * kept with a change, a tab (which JSON text never holds raw) and where its key line is in the
 * event log, so that the line can be blanked there once the key has expired (key-log-copies.ts).
 */
export function journalLine(name: string, json: string, copy?: LogCopy): string {
  return copy === undefined
    ? `${name} ${json}\n`
    : `${name} ${json}\t${copy.segment}:${copy.offset}\n`
}

/** The bytes of a journal line's JSON, from `from` (past its name and space) to its tab, if any. */
export function journalJson(line: Buffer, from: number): Buffer {
  const tab = line.indexOf(TAB, from)
  return line.subarray(from, tab === -1 ? line.length : tab)
}

/** Where a journal line says the log's copy of its key is; undefined when it names none. */
export function journalCopy(line: Buffer): LogCopy | undefined {
  const tab = line.lastIndexOf(TAB)
  if (tab === -1) return undefined
  const found = JOURNAL_COPY.exec(line.toString('latin1', tab))
  if (found === null) return undefined
  const [, segment = '', offset = ''] = found
  return { segment, offset: Number(offset) }
}

/** The bytes of a key line's JSON (a line of the log that isKeyLine, its newline left out). */
export function keyLineJson(line: Buffer): Buffer {
  // After the JSON: `,"for":"`, the event's 16 hex digits, `"}`.
  return line.subarray(KEY_LINE_START.length, line.length - KEY_LINE_FOR_START.length - 18)
}

/** Whether a line of the log is a key's line (which the feed never shows nor quarantines). */
export function isKeyLine(line: Buffer): boolean {
  return line.toString('latin1', 0, KEY_LINE_START.length) === KEY_LINE_START
}

/** The event id a key line names, read from its end; undefined when it names none. */
export function keyLineFor(line: Buffer): number | undefined {
  const tail = line.toString('latin1', Math.max(0, line.length - 40))
  const id = KEY_LINE_FOR.exec(tail)?.[1]
  return id === undefined ? undefined : safeId(id)
}

/** The key a log line keeps, and its event's id; undefined for a line that is not a whole one. */
export function parseKeyLine(text: string): { kept: KeptKey; eventId: string } | undefined {
  const value = parseJson(text)
  if (!isRecord(value) || typeof value['for'] !== 'string') return undefined
  const kept = toKeptKey(value['key'])
  return kept === undefined ? undefined : { kept, eventId: value['for'] }
}

/** A kept key's JSON read back; undefined when it is not a whole kept key. */
export function parseKeptKey(text: string): KeptKey | undefined {
  return toKeptKey(parseJson(text))
}

function plainKey(kept: KeptKey): KeptKey {
  const { status, body, contentType, etag, headers } = kept.answer
  const answer: KeptAnswer = {
    status,
    ...(body === undefined ? {} : { body }),
    ...(contentType === undefined ? {} : { contentType }),
    ...(etag === undefined ? {} : { etag }),
    ...(headers === undefined ? {} : { headers }),
  }
  const { subject, key, fingerprint, expiresAt } = kept
  return { subject, key, fingerprint, answer, expiresAt }
}

function toKeptKey(value: unknown): KeptKey | undefined {
  if (!isRecord(value)) return undefined
  const { subject, key, fingerprint, answer, expiresAt } = value
  if (typeof subject !== 'string' || typeof key !== 'string' || typeof fingerprint !== 'string')
    return undefined
  if (typeof expiresAt !== 'number' || !Number.isFinite(expiresAt)) return undefined
  const kept = toAnswer(answer)
  return kept === undefined ? undefined : { subject, key, fingerprint, answer: kept, expiresAt }
}

function toAnswer(value: unknown): KeptAnswer | undefined {
  if (!isRecord(value)) return undefined
  const { status, body, contentType, etag, headers } = value
  if (typeof status !== 'number' || !Number.isInteger(status)) return undefined
  if (!optionalString(body) || !optionalString(contentType) || !optionalString(etag))
    return undefined
  if (headers !== undefined && !isStringRecord(headers)) return undefined
  return {
    status,
    ...(body === undefined ? {} : { body }),
    ...(contentType === undefined ? {} : { contentType }),
    ...(etag === undefined ? {} : { etag }),
    ...(headers === undefined ? {} : { headers }),
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

function optionalString(value: unknown): value is string | undefined {
  return value === undefined || typeof value === 'string'
}

function isStringRecord(value: unknown): value is Record<string, string> {
  return isRecord(value) && Object.values(value).every((item) => typeof item === 'string')
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
