import {
  closeSync,
  fsyncSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  truncateSync,
  unlinkSync,
  writeSync,
} from 'node:fs'
import { type FileHandle, open, unlink } from 'node:fs/promises'
import path from 'node:path'
import { TextDecoder } from 'node:util'

import {
  type ChangeEvent,
  EVENT_ID,
  type EventHead,
  eventIdNumber,
  eventJson,
  formatEventId,
  parseEvent,
  parseEventHead,
} from '../../domain/event.js'
import { type Logger, silentLogger } from '../../logger.js'
import type { EventIndex, EventPlace } from '../feed/event-index.js'
import type { EventBodies } from '../feed/journal.js'
import { makeDurableDirectory, syncDirectorySync, WriteError } from './atomic-write.js'
import { hasCode } from './data-dir-lock.js'

const SEGMENT = /^([0-9a-f]{16})\.ndjson$/
const VOID = /^\{"void":"([0-9a-f]{16})"\}$/
/** An id in a line that is not a whole event (read as latin1, so that any byte is a character). */
const SOME_ID = /"id":"([0-9a-f]{16})"/
const NEWLINE = 0x0a
/** The segment number of an event this log never wrote (see `keep`). */
const UNLOGGED = 0xffffffff
/** Bodies of the newest events kept in memory, for live streams: at most this many bytes. */
const RECENT_BYTES = 1024 * 1024
/** Two records on disk closer than this are read with one read, of at most READ_MAX bytes. */
const READ_GAP = 64 * 1024
const READ_MAX = 1024 * 1024

/** A new segment is started past this size or age, so that retention can drop whole old ones. */
export interface EventLogOptions {
  readonly segmentBytes?: number
  readonly segmentMs?: number
  readonly now?: () => number
  /** Where damaged records are copied (DATA_DIR/quarantine); undefined: they are only logged. */
  readonly quarantineDir?: string
  readonly logger?: Logger
}

interface Segment {
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
  readonly opened: number
}

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

interface Waiting {
  readonly line: Buffer
  readonly event: ChangeEvent | undefined
  readonly resolve: () => void
  readonly reject: (error: unknown) => void
}

/**
 * The file store's change feed on disk: `DATA_DIR/events/<first id>.ndjson` segments, one JSON
 * line per event, or `{"void":"<id>"}` for an event whose change was never made. Appends are
 * group-committed: every line waiting when a batch starts is written with one write and one
 * fdatasync, shared by all the writers in it. Memory holds an index of where each event is
 * (EventIndex) and a small cache of the newest bodies; pages read the rest from the segments.
 */
export class EventLog implements EventBodies {
  readonly dir: string
  readonly #segmentBytes: number
  readonly #segmentMs: number
  readonly #now: () => number
  readonly #quarantineDir: string | undefined
  readonly #logger: Logger
  readonly #segments: Segment[] = []
  #nextSerial = 0
  #handle: FileHandle | undefined
  #waiting: Waiting[] = []
  #flushing = false
  /** The highest event id ever appended. */
  #highest = 0
  /** Where each appended event landed, until the journal keeps it (or discards it). */
  readonly #placed = new Map<number, EventPlace>()
  /** The newest bodies by slot, oldest first, and their bytes. */
  readonly #recent = new Map<number, { event: ChangeEvent; bytes: number }>()
  #recentBytes = 0
  /** Events committed without having been appended here (a subclass that keeps events elsewhere). */
  readonly #unlogged = new Map<number, ChangeEvent>()

  constructor(dir: string, options: EventLogOptions = {}) {
    this.dir = dir
    this.#segmentBytes = options.segmentBytes ?? 16 * 1024 * 1024
    this.#segmentMs = options.segmentMs ?? 60 * 60 * 1000
    this.#now = options.now ?? Date.now
    this.#quarantineDir = options.quarantineDir
    this.#logger = options.logger ?? silentLogger
  }

  /**
   * Reads every segment into `index`, byte by byte: offsets are byte offsets. A torn last line (a
   * crash during a write that was never acknowledged) is cut off. A damaged line (not UTF-8, not
   * JSON, not an event, out of id order) is copied to the quarantine, logged and left out; every
   * other line is kept. Events voided in the log, and those `isMade` says were never made, are
   * left out of the index. The next id is past every id seen: in events, voids, damaged lines
   * whose id can be read, and segment names.
   */
  load(index: EventIndex, isMade: (event: EventHead) => boolean): LoadedLog {
    const names = readdirSync(this.dir)
      .filter((name) => SEGMENT.test(name))
      .sort()
    const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })
    const voided = new Set<number>()
    const ghosts = new Set<number>()
    let maxId = 0
    let damaged = 0
    for (const name of names) {
      const file = path.join(this.dir, name)
      const data = readFileSync(file)
      const end = data.lastIndexOf(NEWLINE) + 1
      if (end < data.length) {
        this.#logger.warn('cut a torn last line from the event log', {
          file,
          offset: end,
          bytes: data.length - end,
        })
        truncateSync(file, end)
      }
      const segment: Segment = {
        serial: this.#nextSerial,
        name,
        first: eventIdNumber(name.slice(0, 16)),
        last: 0,
        lastTime: '',
        bytes: end,
        opened: this.#now(),
      }
      this.#nextSerial += 1
      for (let offset = 0; offset < end; ) {
        const stop = data.indexOf(NEWLINE, offset)
        const line = data.subarray(offset, stop)
        const problem =
          line.length === 0
            ? undefined
            : this.#loadLine(line, offset, segment, decoder, index, voided, ghosts, isMade)
        if (problem !== undefined) {
          damaged += 1
          const id = SOME_ID.exec(line.toString('latin1'))?.[1]
          if (id !== undefined) maxId = Math.max(maxId, safeId(id) ?? 0)
          this.#quarantine(file, segment, offset, line, problem, id)
        }
        maxId = Math.max(maxId, segment.last)
        offset = stop + 1
      }
      this.#segments.push(segment)
    }
    for (const id of voided) maxId = Math.max(maxId, id)
    const left = new Set([...voided, ...ghosts])
    if (left.size > 0) index.retain((slot) => !left.has(index.idAt(slot)))
    const lastSegment = this.#segments.at(-1)
    const nextId = Math.max(maxId + 1, lastSegment?.first ?? 1)
    this.#highest = nextId - 1
    return {
      nextId,
      prunedThrough: (this.#segments[0]?.first ?? nextId) - 1,
      ghosts: [...ghosts].filter((id) => !voided.has(id)).map((id) => formatEventId(id)),
      events: index.size,
      damaged,
    }
  }

  /** Indexes one line; returns what is wrong with it, or undefined when it is whole. */
  #loadLine(
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
    const previous = index.size > 0 ? index.idAt(index.end - 1) : 0
    if (id <= previous)
      return `the event's id is not after the one before it (${formatEventId(previous)})`
    index.push(id, head.type, head.userId, { segment: segment.serial, offset, bytes: line.length })
    segment.last = id
    if (head.time > segment.lastTime) segment.lastTime = head.time
    if (!isMade(head)) ghosts.add(id)
    return undefined
  }

  /**
   * Copies a damaged record, durably, to the quarantine (once: a later start finds it there) and
   * logs it. The segment is left as it is: every other record keeps its offset.
   */
  #quarantine(
    file: string,
    segment: Segment,
    offset: number,
    line: Buffer,
    reason: string,
    id: string | undefined,
  ): void {
    const fields = { file, offset, bytes: line.length, reason, ...(id === undefined ? {} : { id }) }
    const dir = this.#quarantineDir
    if (dir === undefined) {
      this.#logger.warn('left out a damaged event record', fields)
      return
    }
    makeDurableDirectory(dir)
    const name = `events-${segment.name.slice(0, 16)}-${offset}.ndjson`
    const target = path.join(dir, name)
    let exists = true
    try {
      statSync(target)
    } catch (error) {
      if (!hasCode(error, 'ENOENT')) throw error
      exists = false
    }
    if (!exists) {
      const temp = path.join(dir, `.${name}.tmp`)
      const fd = openSync(temp, 'w', 0o600)
      try {
        writeSync(fd, line)
        writeSync(fd, '\n')
        fsyncSync(fd)
      } finally {
        closeSync(fd)
      }
      try {
        renameSync(temp, target)
      } catch (error) {
        unlinkSync(temp)
        throw error
      }
      syncDirectorySync(dir)
    }
    this.#logger.warn('quarantined a damaged event record', { ...fields, quarantine: target })
  }

  /** Appends the event; resolves once it is durable. A failure is a WriteError. */
  append(event: ChangeEvent): Promise<void> {
    return this.#enqueue(Buffer.from(`${eventJson(event)}\n`), event)
  }

  /** Durably marks the event as never having happened. */
  void(id: string): Promise<void> {
    return this.#enqueue(Buffer.from(`{"void":"${id}"}\n`), undefined)
  }

  #enqueue(line: Buffer, event: ChangeEvent | undefined): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#waiting.push({ line, event, resolve, reject })
      if (!this.#flushing) void this.#flush()
    })
  }

  async #flush(): Promise<void> {
    this.#flushing = true
    while (this.#waiting.length > 0) {
      const batch = this.#waiting
      this.#waiting = []
      try {
        await this.#writeBatch(batch)
        for (const entry of batch) entry.resolve()
      } catch (error) {
        for (const entry of batch) entry.reject(error)
      }
    }
    // Idle: no file stays open for writing (a read-only remount, or an unmount, is not refused).
    const handle = this.#handle
    this.#handle = undefined
    await handle?.close().catch(() => undefined)
    this.#flushing = false
    if (this.#waiting.length > 0) void this.#flush()
  }

  async #writeBatch(batch: readonly Waiting[]): Promise<void> {
    const segment = await this.#activeSegment()
    const handle = this.#handle
    if (handle === undefined) throw new Error('the event log is closed')
    const data =
      batch.length === 1 && batch[0] !== undefined
        ? batch[0].line
        : Buffer.concat(batch.map((entry) => entry.line))
    try {
      await handle.write(data, 0, data.length, segment.bytes)
    } catch (error) {
      throw new WriteError('write', error, false)
    }
    try {
      await handle.datasync()
    } catch (error) {
      throw new WriteError('file-sync', error, false)
    }
    let offset = segment.bytes
    for (const { event, line } of batch) {
      if (event !== undefined) {
        const id = eventIdNumber(event.id)
        this.#placed.set(id, { segment: segment.serial, offset, bytes: line.length - 1 })
        segment.last = Math.max(segment.last, id)
        this.#highest = Math.max(this.#highest, segment.last)
        if (event.time > segment.lastTime) segment.lastTime = event.time
      }
      offset += line.length
    }
    segment.bytes += data.length
  }

  /**
   * The segment to append to: a new one, named by the next id, when the current one holds events
   * and is too big or too old. Names therefore grow, and a segment's name is at most its first id.
   */
  async #activeSegment(): Promise<Segment> {
    const current = this.#segments.at(-1)
    const roll =
      current === undefined ||
      (current.last > 0 &&
        (current.bytes >= this.#segmentBytes || this.#now() - current.opened >= this.#segmentMs))
    if (!roll && this.#handle !== undefined) return current
    await this.#handle?.close()
    this.#handle = undefined
    const first = roll ? this.#highest + 1 : current.first
    const name = `${formatEventId(first)}.ndjson`
    let handle: FileHandle
    try {
      handle = await open(path.join(this.dir, name), 'a+', 0o600)
    } catch (error) {
      throw new WriteError('write', error, false)
    }
    if (roll) {
      try {
        // The new name must survive a crash before any event in it is acknowledged.
        syncDirectorySync(this.dir)
      } catch (error) {
        await handle.close()
        throw new WriteError('dir-sync', error, false)
      }
    }
    this.#handle = handle
    if (!roll) return current
    const bytes = statSync(path.join(this.dir, name)).size
    const segment: Segment = {
      serial: this.#nextSerial,
      name,
      first,
      last: 0,
      lastTime: '',
      bytes,
      opened: this.#now(),
    }
    this.#nextSerial += 1
    this.#segments.push(segment)
    return segment
  }

  keep(slot: number, event: ChangeEvent): EventPlace {
    const id = eventIdNumber(event.id)
    const place = this.#placed.get(id)
    if (place === undefined) {
      this.#unlogged.set(slot, event)
      return { segment: UNLOGGED, offset: 0, bytes: Buffer.byteLength(eventJson(event)) }
    }
    this.#placed.delete(id)
    this.#recent.set(slot, { event, bytes: place.bytes })
    this.#recentBytes += place.bytes
    for (const [old, entry] of this.#recent) {
      if (this.#recentBytes <= RECENT_BYTES) break
      this.#recent.delete(old)
      this.#recentBytes -= entry.bytes
    }
    return place
  }

  discard(event: ChangeEvent): void {
    this.#placed.delete(eventIdNumber(event.id))
  }

  /**
   * Reads the bodies of these rows: from the cache of the newest, else from their segments, with
   * one read for records close together. Undefined when a row or its segment was pruned meanwhile.
   */
  async read(index: EventIndex, slots: readonly number[]): Promise<ChangeEvent[] | undefined> {
    const events: (ChangeEvent | undefined)[] = []
    const wanted = new Map<number, { at: number; place: EventPlace }[]>()
    for (const [at, slot] of slots.entries()) {
      if (slot < index.start || slot >= index.end) return undefined
      const known = this.#recent.get(slot)?.event ?? this.#unlogged.get(slot)
      events.push(known)
      if (known !== undefined) continue
      const place = index.placeAt(slot)
      const list = wanted.get(place.segment) ?? []
      list.push({ at, place })
      wanted.set(place.segment, list)
    }
    for (const [serial, list] of wanted) {
      const segment = this.#segments[serial - (this.#segments[0]?.serial ?? 0)]
      if (segment?.serial !== serial) return undefined
      const file = path.join(this.dir, segment.name)
      let handle: FileHandle
      try {
        handle = await open(file, 'r')
      } catch (error) {
        if (hasCode(error, 'ENOENT')) return undefined
        throw error
      }
      try {
        await readRecords(handle, file, list, events)
      } finally {
        await handle.close()
      }
    }
    const found = events.filter((event): event is ChangeEvent => event !== undefined)
    if (found.length !== slots.length) throw new Error('an event of the page could not be read')
    return found
  }

  dropBefore(slot: number): void {
    for (const [old, entry] of this.#recent) {
      if (old >= slot) break
      this.#recent.delete(old)
      this.#recentBytes -= entry.bytes
    }
    for (const old of this.#unlogged.keys()) {
      if (old >= slot) break
      this.#unlogged.delete(old)
    }
  }

  /**
   * Removes every closed segment whose newest event is older than `cutoff` (oldest first, never the
   * one appended to). `drop` is told the highest id removed before any file goes, so that no page
   * looks for a body in a file that is gone (one that looked already is read again).
   */
  async prune(cutoff: string, drop: (through: number) => void): Promise<void> {
    let count = 0
    while (
      count < this.#segments.length - 1 &&
      (this.#segments[count]?.lastTime ?? cutoff) < cutoff
    )
      count += 1
    const next = this.#segments[count]
    if (count === 0 || next === undefined) return
    const removed = this.#segments.splice(0, count)
    drop(next.first - 1)
    for (const segment of removed) await unlink(path.join(this.dir, segment.name))
    syncDirectorySync(this.dir)
  }

  async close(): Promise<void> {
    const handle = this.#handle
    this.#handle = undefined
    await handle?.close()
  }
}

/** The id as a number, or undefined past the safe integers (no id this store hands out is). */
function safeId(id: string): number | undefined {
  if (!EVENT_ID.test(id)) return undefined
  try {
    return eventIdNumber(id)
  } catch {
    return undefined
  }
}

/** Reads records of one segment into `events` at their positions, merging reads of near ones. */
async function readRecords(
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
