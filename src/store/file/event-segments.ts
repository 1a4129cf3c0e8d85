import { EVENT_ID, eventIdNumber } from '../../domain/event.js'

/** A segment's file name: its first id, 16 hex digits. */
export const SEGMENT = /^([0-9a-f]{16})\.ndjson$/
/** How an event's line begins: eventJson writes the id first. */
const LEADING_ID = /^\{"id":"([0-9a-f]{16})"/
const LEADING_ID_BYTES = 25

export interface Segment {
  /** Numbers the segments in name order; the index names a segment by it. */
  readonly serial: number
  readonly name: string
  /** The first id the segment may hold. */
  readonly first: number
  /** The highest event id in it, 0 when none; the newest event time in it. */
  last: number
  lastTime: string
  /** Bytes of whole lines: where the next line goes. */
  bytes: number
  /**
   * When it began, in ms since the epoch: when it was made, or, for one loaded at a start, when
   * its first event was, so that a restart does not make an old segment young again.
   */
  opened: number
}

/** The event log's segments, oldest first, and the highest event id ever appended to them. */
export class Segments {
  readonly list: Segment[] = []
  #nextSerial = 0
  /** The highest event id ever appended. */
  highest = 0

  /** A segment with no events yet, numbered after every other; `push` puts it at the end. */
  make(name: string, first: number, bytes: number, opened: number): Segment {
    const segment: Segment = {
      serial: this.#nextSerial,
      name,
      first,
      last: 0,
      lastTime: '',
      bytes,
      opened,
    }
    this.#nextSerial += 1
    return segment
  }

  push(segment: Segment): void {
    this.list.push(segment)
  }

  /** The segment with this serial, or undefined when it was pruned. */
  bySerial(serial: number): Segment | undefined {
    const segment = this.list[serial - (this.list[0]?.serial ?? 0)]
    return segment?.serial === serial ? segment : undefined
  }
}

/** The id as a number, or undefined past the safe integers (no id this store hands out is). */
export function safeId(id: string): number | undefined {
  if (!EVENT_ID.test(id)) return undefined
  try {
    return eventIdNumber(id)
  } catch {
    return undefined
  }
}

/**
 * The id an event's line begins with, undefined for any other line (a void, a key's line, a byte
 * before the brace). The replay finds its events by this id, so the load and the replay both take
 * a line as an event only when it begins so, and with the id it holds.
 */
export function leadingId(line: Buffer): number | undefined {
  const id = LEADING_ID.exec(line.toString('latin1', 0, LEADING_ID_BYTES))?.[1]
  return id === undefined ? undefined : safeId(id)
}
