import { type FileHandle, open } from 'node:fs/promises'
import path from 'node:path'

import { hasCode } from './errno.js'
import { KEY_LINE_FOR_START, KEY_LINE_START, type LogCopy } from './key-format.js'

const HEAD = Buffer.from(KEY_LINE_START, 'latin1')
const TAIL = Buffer.from(KEY_LINE_FOR_START, 'latin1')
/** What a blanked key line holds instead of the key: JSON's null, then spaces (JSON whitespace). */
const NULL = Buffer.from('null', 'latin1')
const SPACE = 0x20

/**
 * Blanks the event log's copies of expired keys (docs/operations.md, kept keys): a key kept with a
 * change is also in the change's append to the log, `{"key":<JSON>,"for":"<event id>"}`, which
 * stays until the feed's retention drops its segment. Its JSON is overwritten in place with `null`
 * and spaces, the same number of bytes, so that no other line moves; the line still starts and ends
 * as a key line, so that a start reads it as one (never shown, never quarantined) even when a crash
 * tore the overwrite, and a replay finds no key in it. A copy is overwritten only when the bytes at
 * its place are exactly that key's line (a journal from another directory is passed by); a segment
 * pruned meanwhile has nothing left to blank. The segments written are fdatasynced by `sync`,
 * before the journal that named the copies is deleted; one whose copy is blanked already is
 * fdatasynced too (the sweep before may have blanked it and failed to sync it).
 */
export class LogCopyBlanker {
  readonly #eventsDir: string
  /** The segments opened, undefined for one that is gone. */
  readonly #handles = new Map<string, FileHandle | undefined>()
  /** The segments to fdatasync. */
  readonly #written = new Set<string>()

  constructor(eventsDir: string) {
    this.#eventsDir = eventsDir
  }

  /** Overwrites the key whose JSON is `json` at `copy`, if its line is still there. */
  async blank(copy: LogCopy, json: Buffer): Promise<void> {
    const handle = await this.#handle(copy.segment)
    if (handle === undefined) return
    const blank = Buffer.alloc(json.length, SPACE)
    NULL.copy(blank)
    const found = Buffer.alloc(HEAD.length + json.length + TAIL.length)
    const { bytesRead } = await handle.read(found, 0, found.length, copy.offset)
    if (bytesRead !== found.length || !found.subarray(0, HEAD.length).equals(HEAD)) return
    if (!found.subarray(HEAD.length + json.length).equals(TAIL)) return
    const held = found.subarray(HEAD.length, HEAD.length + json.length)
    if (held.equals(json)) await handle.write(blank, 0, blank.length, copy.offset + HEAD.length)
    else if (!held.equals(blank)) return
    this.#written.add(copy.segment)
  }

  /** Makes the overwrites durable. */
  async sync(): Promise<void> {
    for (const segment of this.#written) await this.#handles.get(segment)?.datasync()
    this.#written.clear()
  }

  async close(): Promise<void> {
    for (const handle of this.#handles.values()) await handle?.close()
    this.#handles.clear()
  }

  async #handle(segment: string): Promise<FileHandle | undefined> {
    if (this.#handles.has(segment)) return this.#handles.get(segment)
    let handle: FileHandle | undefined
    try {
      handle = await open(path.join(this.#eventsDir, segment), 'r+')
    } catch (error) {
      if (!hasCode(error, 'ENOENT')) throw error
    }
    this.#handles.set(segment, handle)
    return handle
  }
}
