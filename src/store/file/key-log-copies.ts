import { writeSync } from 'node:fs'
import { type FileHandle, open } from 'node:fs/promises'
import path from 'node:path'

import { WriteError } from '../write-error.js'
import { hasCode } from './errno.js'
import { KEY_LINE_FOR_START, KEY_LINE_START, type LogCopy } from './key-format.js'
import { UPDATE_OWN } from './own-files.js'

const HEAD = Buffer.from(KEY_LINE_START, 'latin1')
const TAIL = Buffer.from(KEY_LINE_FOR_START, 'latin1')
/** What a blanked key line holds instead of the key: JSON's null, then spaces (JSON whitespace). */
const NULL = Buffer.from('null', 'latin1')
const SPACE = 0x20
/** Copies (and bytes of their JSON) held at most before they are read and overwritten together. */
const BATCH = 512
const BATCH_BYTES = 1024 * 1024
/** The most bytes one read of a segment spans (a longer line is read alone). */
const READ_SPAN = 1024 * 1024

interface Pending {
  readonly segment: string
  readonly offset: number
  /** The key's JSON as its journal line holds it. */
  readonly json: Buffer
}

/**
 * Blanks the event log's copies of expired keys (docs/operations.md, kept keys): a key kept with a
 * change is also in the change's append to the log, `{"key":<JSON>,"for":"<event id>"}`, which
 * stays until the feed's retention drops its segment. Its JSON is overwritten in place with `null`
 * and spaces, the same number of bytes, so that no other line moves; the line still starts and ends
 * as a key line, so that a start reads it as one (never shown, never quarantined) even when a crash
 * tore the overwrite, and a replay finds no key in it. A copy is overwritten only when the bytes at
 * its place are exactly that key's line (a journal from another directory is passed by); a segment
 * pruned meanwhile has nothing left to blank. Copies are taken a batch at a time, in offset order,
 * the segment read a span at a time around them (one read for hundreds of keys), and only the
 * keys' bytes written, each with a small synchronous write to pages the read has just brought in.
 * `sync` fdatasyncs the segments written, before the journal that named the copies is deleted;
 * one whose copy is blanked already is fdatasynced too (the sweep before may have blanked it and
 * failed to sync it).
 */
export class LogCopyBlanker {
  readonly #eventsDir: string
  /** The segments opened, undefined for one that is gone. */
  readonly #handles = new Map<string, FileHandle | undefined>()
  /** The segments to fdatasync. */
  readonly #written = new Set<string>()
  #pending: Pending[] = []
  #pendingBytes = 0

  constructor(eventsDir: string) {
    this.#eventsDir = eventsDir
  }

  /** Overwrites the key whose JSON is `json` at `copy` (by `sync`), if its line is still there. */
  blank(copy: LogCopy, json: Buffer): Promise<void> | undefined {
    // Copied: the caller's buffer may be reused.
    this.#pending.push({ segment: copy.segment, offset: copy.offset, json: Buffer.from(json) })
    this.#pendingBytes += json.length
    const full = this.#pending.length >= BATCH || this.#pendingBytes >= BATCH_BYTES
    return full ? this.#blankPending() : undefined
  }

  /** Overwrites what is pending and makes every overwrite durable; a failed fdatasync is a WriteError. */
  async sync(): Promise<void> {
    await this.#blankPending()
    for (const segment of this.#written) {
      try {
        await this.#handles.get(segment)?.datasync()
      } catch (error) {
        throw new WriteError('file-sync', error)
      }
    }
    this.#written.clear()
  }

  async close(): Promise<void> {
    for (const handle of this.#handles.values()) await handle?.close()
    this.#handles.clear()
  }

  async #blankPending(): Promise<void> {
    const pending = this.#pending.sort((a, b) =>
      a.segment === b.segment ? a.offset - b.offset : a.segment < b.segment ? -1 : 1,
    )
    this.#pending = []
    this.#pendingBytes = 0
    let from = 0
    while (from < pending.length) {
      const first = pending[from]
      if (first === undefined) break
      // One read for the copies of one segment that fit in READ_SPAN from the first.
      let to = from + 1
      for (let next = pending[to]; next !== undefined; next = pending[to]) {
        if (next.segment !== first.segment || lineEnd(next) - first.offset > READ_SPAN) break
        to += 1
      }
      const last = pending[to - 1] ?? first
      await this.#blankSpan(pending.slice(from, to), first.offset, lineEnd(last))
      from = to
    }
  }

  /** Reads the segment's bytes from `start` to `end` once, and blanks each copy found whole. */
  async #blankSpan(copies: readonly Pending[], start: number, end: number): Promise<void> {
    const segment = copies[0]?.segment
    const handle = segment === undefined ? undefined : await this.#handle(segment)
    if (segment === undefined || handle === undefined) return
    const bytes = Buffer.alloc(end - start)
    const { bytesRead } = await handle.read(bytes, 0, bytes.length, start)
    const span = bytes.subarray(0, bytesRead)
    for (const { offset, json } of copies) {
      const at = offset - start
      if (!span.subarray(at, at + HEAD.length).equals(HEAD)) continue
      const jsonAt = at + HEAD.length
      const tailAt = jsonAt + json.length
      if (!span.subarray(tailAt, tailAt + TAIL.length).equals(TAIL)) continue
      const held = span.subarray(jsonAt, tailAt)
      const blank = Buffer.alloc(json.length, SPACE)
      NULL.copy(blank)
      if (held.equals(json)) writeSync(handle.fd, blank, 0, blank.length, offset + HEAD.length)
      else if (!held.equals(blank)) continue
      this.#written.add(segment)
    }
  }

  async #handle(segment: string): Promise<FileHandle | undefined> {
    if (this.#handles.has(segment)) return this.#handles.get(segment)
    let handle: FileHandle | undefined
    try {
      handle = await open(path.join(this.#eventsDir, segment), UPDATE_OWN)
    } catch (error) {
      if (!hasCode(error, 'ENOENT')) throw error
    }
    this.#handles.set(segment, handle)
    return handle
  }
}

/** Where a copy's bytes end: its head, its JSON and the tail up to its event's id. */
function lineEnd(copy: Pending): number {
  return copy.offset + HEAD.length + copy.json.length + TAIL.length
}
