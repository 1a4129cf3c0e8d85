import { TextDecoder } from 'node:util'

import { parseEventHead } from '../../domain/event.js'
import { isExpired, type KeptKey } from '../../domain/kept-key.js'
import type { DurableDirectory } from './atomic-write.js'
import { safeId } from './event-segments.js'
import { isKeyLine, parseKeyLine } from './key-format.js'
import { writeKeyFile } from './key-write.js'
import { readLines } from './segment-lines.js'

/** Key files written again at once while replaying (as many as the user files). */
const REPLAY_AT_ONCE = 64

export interface KeyReplay {
  /** The segments of the log's tail, in order. */
  readonly files: readonly string[]
  /** The checkpoint: key lines of events at or behind it have their files fsynced already. */
  readonly after: number
  readonly voided: ReadonlySet<number>
  readonly keys: DurableDirectory
  readonly now: number
}

/**
 * Writes again (unsynced: the replay fsyncs them before the checkpoint moves) the key file of
 * every key line past the checkpoint whose event counts: its line follows the key's at once,
 * whole (a torn append left neither), and is not voided (its change failed). A key that has
 * expired meanwhile is left out. Streamed: memory holds one batch of keys, and their names.
 */
export async function replayKeys(replay: KeyReplay): Promise<string[]> {
  const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })
  const names: string[] = []
  let batch: KeptKey[] = []
  const flush = async (): Promise<void> => {
    const running = batch
    batch = []
    names.push(...(await Promise.all(running.map((kept) => writeKeyFile(replay.keys, kept)))))
  }
  for (const file of replay.files) {
    let waiting: { kept: KeptKey; eventId: string } | undefined
    await readLines(file, (bytes) => {
      const previous = waiting
      waiting = undefined
      if (isKeyLine(bytes)) {
        const text = decode(decoder, bytes)
        waiting = text === undefined ? undefined : parseKeyLine(text)
        return
      }
      // Most lines follow no key: they are not even read as text.
      const text = previous === undefined ? undefined : decode(decoder, bytes)
      if (previous === undefined || text === undefined) return
      const head = parseEventHead(text)
      const id = head === undefined ? undefined : safeId(head.id)
      if (head?.id !== previous.eventId || id === undefined) return
      if (id <= replay.after || replay.voided.has(id) || isExpired(previous.kept, replay.now))
        return
      batch.push(previous.kept)
      return batch.length >= REPLAY_AT_ONCE ? flush() : undefined
    })
  }
  await flush()
  return names
}

function decode(decoder: TextDecoder, bytes: Uint8Array): string | undefined {
  try {
    return decoder.decode(bytes)
  } catch {
    return undefined
  }
}
