import { readdirSync, truncateSync } from 'node:fs'
import path from 'node:path'
import { TextDecoder } from 'node:util'

import { type EventHead, eventIdNumber, formatEventId, parseEventHead } from '../../domain/event.js'
import type { Logger } from '../../log/logger.js'
import type { EventIndex } from '../feed/event-index.js'
import type { DamagedRecord } from './event-quarantine.js'
import { beginsWithId, SEGMENT, type Segment, type Segments, safeId } from './event-segments.js'
import { isKeyLine, keyLineFor } from './key-format.js'
import { readLines } from './segment-lines.js'

const VOID = /^\{"void":"([0-9a-f]{16})"\}$/
/** An id in a line that is not a whole event (read as latin1, so that any byte is a character). */
const SOME_ID = /"id":"([0-9a-f]{16})"/

export interface LoadedLog {
  readonly nextId: number
  /** Every id up to this one was pruned (the first segment's first id - 1). */
  readonly prunedThrough: number
  /** Events left out of the index because their change is not in the store: void them. */
  readonly ghosts: readonly string[]
  /** Rows the index got, and records left out as damaged. */
  readonly events: number
  readonly damaged: number
}

/** What loading needs besides the index: where the segments are, and what to do with damage. */
export interface LoadContext {
  readonly dir: string
  readonly segments: Segments
  readonly now: () => number
  readonly logger: Logger
  readonly quarantine: (record: DamagedRecord) => void
}

/**
 * Reads every segment into `index`, byte by byte (offsets are byte offsets), streamed: the event
 * loop is served while it reads (readLines). A torn last line (a crash during a write that was
 * never acknowledged) is cut off. A damaged line (not UTF-8, not JSON, not an event, not begun as
 * the log writes one, out of id order) is copied to the quarantine, logged and left out; every
 * other line is kept, but for the lines of kept keys, which are skipped. Events voided in the log,
 * and those `isMade` says were never made, are left out of the index. The next id is past every
 * id seen: in events, voids, key lines, damaged lines whose id can be read, and segment names.
 */
export async function loadSegments(
  context: LoadContext,
  index: EventIndex,
  isMade: (event: EventHead) => boolean,
): Promise<LoadedLog> {
  const { dir, segments, logger } = context
  const names = readdirSync(dir)
    .filter((name) => SEGMENT.test(name))
    .sort()
  const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })
  const voided = new Set<number>()
  const ghosts = new Set<number>()
  let maxId = 0
  let damaged = 0
  for (const name of names) {
    const file = path.join(dir, name)
    const segment = segments.make(name, eventIdNumber(name.slice(0, 16)), 0, context.now())
    const { end, size } = await readLines(file, (line, offset) => {
      if (isKeyLine(line)) {
        // Not an event: never shown nor quarantined. Its event's id is never handed out again,
        // so that a key whose event line was torn off cannot come to precede another event.
        maxId = Math.max(maxId, keyLineFor(line) ?? 0)
        return
      }
      const problem =
        line.length === 0
          ? undefined
          : loadLine(line, offset, segment, decoder, index, voided, ghosts, isMade)
      if (problem !== undefined) {
        damaged += 1
        const id = SOME_ID.exec(line.toString('latin1'))?.[1]
        if (id !== undefined) maxId = Math.max(maxId, safeId(id) ?? 0)
        context.quarantine({ file, segmentName: segment.name, offset, line, reason: problem, id })
      }
      maxId = Math.max(maxId, segment.last)
    })
    if (end < size) {
      logger.warn('cut a torn last line from the event log', {
        file,
        offset: end,
        bytes: size - end,
      })
      truncateSync(file, end)
    }
    segment.bytes = end
    segments.push(segment)
  }
  for (const id of voided) maxId = Math.max(maxId, id)
  const left = new Set([...voided, ...ghosts])
  if (left.size > 0) index.retain((slot) => !left.has(index.idAt(slot)))
  const lastSegment = segments.list.at(-1)
  const nextId = Math.max(maxId + 1, lastSegment?.first ?? 1)
  segments.highest = nextId - 1
  return {
    nextId,
    prunedThrough: (segments.list[0]?.first ?? nextId) - 1,
    ghosts: [...ghosts].filter((id) => !voided.has(id)).map((id) => formatEventId(id)),
    events: index.size,
    damaged,
  }
}

/** Indexes one line; returns what is wrong with it, or undefined when it is whole. */
function loadLine(
  line: Buffer,
  offset: number,
  segment: Segment,
  decoder: TextDecoder,
  index: EventIndex,
  voided: Set<number>,
  ghosts: Set<number>,
  isMade: (event: EventHead) => boolean,
): string | undefined {
  let text: string
  try {
    text = decoder.decode(line)
  } catch {
    return 'the record is not valid UTF-8'
  }
  const gone = VOID.exec(text)?.[1]
  if (gone !== undefined) {
    const id = safeId(gone)
    if (id === undefined) return 'the record voids an id past the ids this store hands out'
    voided.add(id)
    return undefined
  }
  const head = parseEventHead(text)
  if (head === undefined) return 'the record is not an event'
  const id = safeId(head.id)
  if (id === undefined) return "the event's id is past the ids this store hands out"
  if (!beginsWithId(text, head.id)) return 'the record does not begin as the log writes an event'
  const previous = index.size > 0 ? index.idAt(index.end - 1) : 0
  if (id <= previous)
    return `the event's id is not after the one before it (${formatEventId(previous)})`
  index.push(id, head.type, head.userId, { segment: segment.serial, offset, bytes: line.length })
  // Its age counts from its first event, not from this start: a service restarted more often than
  // the segment age would otherwise append to one segment for ever, which retention never drops.
  if (segment.last === 0)
    segment.opened = Math.min(segment.opened, Date.parse(head.time) || Infinity)
  segment.last = id
  if (head.time > segment.lastTime) segment.lastTime = head.time
  if (!isMade(head)) ghosts.add(id)
  return undefined
}
