import { EVENT_ID, eventIdNumber } from '../../domain/event.js'

/** A segment's file name: its first id, 16 hex digits. */
export const SEGMENT = /^([0-9a-f]{16})\.ndjson$/
/** How an event's line begins, `{"id":"<16 hex>"`: eventJson writes the id first. */
const ID_START_TEXT = '{"id":"'
const ID_START = Buffer.from(ID_START_TEXT)
const ID_END = ID_START.length + 16
const QUOTE = 0x22

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
 * before the brace). The replay finds its events by this id, so the load, the replay and the key
 * replay take a line as an event only when it begins so, with the id it holds (beginsWithId).
 */
export function leadingId(line: Buffer): number | undefined {
  // Bytes compared, not a pattern over a string: the replay asks it of every line of the tail.
  if (line.length <= ID_END || line[ID_END] !== QUOTE) return undefined
  if (line.compare(ID_START, 0, ID_START.length, 0, ID_START.length) !== 0) return undefined
  return safeId(line.toString('latin1', ID_START.length, ID_END))
}

/**
 * Whether an event's text begins with its own id (`id`, as parsed) as eventJson writes it: what
 * `leadingId` reads from the bytes, for a line already decoded and parsed.
 */
export function beginsWithId(text: string, id: string): boolean {
  return (
    text.startsWith(ID_START_TEXT) &&
    text.startsWith(id, ID_START_TEXT.length) &&
    text.charCodeAt(ID_END) === QUOTE
  )
}
