import type { FileHandle } from 'node:fs/promises'
import { TextDecoder } from 'node:util'

import { type ChangeEvent, parseEvent } from '../../domain/event.js'
import type { EventPlace } from '../feed/event-index.js'

/** Two records on disk closer than this are read with one read, of at most READ_MAX bytes. */
const READ_GAP = 64 * 1024
const READ_MAX = 1024 * 1024

/** Reads records of one segment into `events` at their positions, merging reads of near ones. */
export async function readRecords(
  handle: FileHandle,
  file: string,
  list: readonly { at: number; place: EventPlace }[],
  events: (ChangeEvent | undefined)[],
): Promise<void> {
  const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })
  for (let i = 0; i < list.length; ) {
    const from = list[i]?.place.offset ?? 0
    let to = from
    let j = i
    for (; j < list.length; j += 1) {
      const place = list[j]?.place
      const far =
        place !== undefined &&
        (place.offset - to > READ_GAP ||
          place.offset < to ||
          place.offset + place.bytes - from > READ_MAX)
      if (place === undefined || (j > i && far)) break
      to = place.offset + place.bytes
    }
    const buffer = Buffer.allocUnsafe(to - from)
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, from)
    if (bytesRead !== buffer.length)
      throw new Error(`the event log ${file} is shorter than its index (offset ${from})`)
    for (; i < j; i += 1) {
      const item = list[i]
      if (item === undefined) continue
      const start = item.place.offset - from
      let event: ChangeEvent | undefined
      try {
        event = parseEvent(decoder.decode(buffer.subarray(start, start + item.place.bytes)))
      } catch {
        event = undefined
      }
      if (event === undefined)
        throw new Error(
          `the event record at ${file}:${item.place.offset} was damaged after it was loaded`,
        )
      events[item.at] = event
    }
  }
}
