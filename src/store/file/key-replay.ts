import path from 'node:path'
import { TextDecoder } from 'node:util'

import { parseEventHead } from '../../domain/event.js'
import { isExpired, type KeptKey } from '../../domain/kept-key.js'
import type { DurableDirectory } from './atomic-write.js'
import { beginsWithId, safeId } from './event-segments.js'
import {
  isKeyLine,
  keptKeyJson,
  keyDigest,
  keyLineJson,
  type LogCopy,
  parseKeyLine,
} from './key-format.js'
import { type JournalEntry, KeyJournal } from './key-journal.js'
import { LogCopyBlanker } from './key-log-copies.js'
import { readLines } from './segment-lines.js'

/** A key line read, waiting for its event's line. */
interface KeyLine {
  readonly kept: KeptKey
  readonly eventId: string
  readonly copy: LogCopy
  /** The key's JSON as the line holds it. */
  readonly json: Buffer
}

/** Keys appended at once while replaying. */
const REPLAY_AT_ONCE = 256

export interface KeyReplay {
  /** The segments of the log's tail, in order. */
  readonly files: readonly string[]
  /** The checkpoint: key lines of events at or behind it have their files fsynced already. */
  readonly after: number
  readonly voided: ReadonlySet<number>
  readonly keys: DurableDirectory
  /** Where the segments are: the lines of keys that expired or whose event was voided are blanked. */
  readonly eventsDir: string
  readonly now: number
}

/**
 * Appends again to its journal (KeyJournal; unsynced: the replay fsyncs them before the checkpoint
 * moves) every key line past the checkpoint whose event counts: its line follows the key's at
 * once, whole (a torn append left neither) and as the log writes it, and is not voided (its change
 * failed). A key that has expired meanwhile is left out, and its line blanked (LogCopyBlanker,
 * durably before this resolves), as is a key whose event was voided or does not follow it: no
 * journal will name them. Streamed: memory holds one batch of keys. Returns the journals written
 * and how many keys.
 */
export async function replayKeys(replay: KeyReplay): Promise<{ journals: string[]; keys: number }> {
  const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })
  const journal = new KeyJournal(replay.keys, replay.eventsDir)
  const blanker = new LogCopyBlanker(replay.eventsDir)
  const names = new Set<string>()
  let keys = 0
  let batch: JournalEntry[] = []
  const flush = async (): Promise<void> => {
    const running = batch
    batch = []
    if (running.length === 0) return
    keys += running.length
    for (const name of await journal.append(running)) names.add(name)
  }
  // A key line whose event's line does not follow it (a torn append) never counts: blanked.
  const orphan = (line: KeyLine | undefined): Promise<void> | undefined =>
    line === undefined ? undefined : blanker.blank(line.copy, line.json)
  try {
    for (const file of replay.files) {
      const segment = path.basename(file)
      const read: { waiting: KeyLine | undefined } = { waiting: undefined }
      await readLines(file, (bytes, offset) => {
        const previous = read.waiting
        read.waiting = undefined
        if (isKeyLine(bytes)) {
          const text = decode(decoder, bytes)
          const parsed = text === undefined ? undefined : parseKeyLine(text)
          if (parsed !== undefined) {
            // readLines reuses its buffer: copied.
            const json = Buffer.from(keyLineJson(bytes))
            read.waiting = { ...parsed, copy: { segment, offset }, json }
          }
          return orphan(previous)
        }
        // Most lines follow no key: they are not even read as text.
        if (previous === undefined) return
        const text = decode(decoder, bytes)
        const head = text === undefined ? undefined : parseEventHead(text)
        const id = head === undefined ? undefined : safeId(head.id)
        // Only an event as the log writes it counts: the replay makes no other.
        const whole = text !== undefined && head !== undefined && beginsWithId(text, head.id)
        if (head?.id !== previous.eventId || id === undefined || !whole) return orphan(previous)
        if (id <= replay.after) return
        const { kept, copy } = previous
        if (replay.voided.has(id) || isExpired(kept, replay.now))
          return blanker.blank(copy, previous.json)
        batch.push({ name: keyDigest(kept.subject, kept.key), kept, json: keptKeyJson(kept), copy })
        return batch.length >= REPLAY_AT_ONCE ? flush() : undefined
      })
      await orphan(read.waiting)
    }
    await flush()
    await blanker.sync()
  } finally {
    await blanker.close()
  }
  return { journals: [...names], keys }
}

function decode(decoder: TextDecoder, bytes: Uint8Array): string | undefined {
  try {
    return decoder.decode(bytes)
  } catch {
    return undefined
  }
}
