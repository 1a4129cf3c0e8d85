import { type FileHandle, open, unlink } from 'node:fs/promises'
import path from 'node:path'

import { type ChangeEvent, type EventHead, eventIdNumber, eventJson } from '../../domain/event.js'
import { type Logger, silentLogger } from '../../log/logger.js'
import type { EventIndex, EventPlace } from '../feed/event-index.js'
import type { EventBodies } from '../feed/journal.js'
import { type DurableWriteObserver, UNOBSERVED } from '../write-timing.js'
import { syncDirectorySync } from './atomic-write.js'
import { hasCode } from './errno.js'
import { SegmentAppender } from './event-append.js'
import { type LoadedLog, loadSegments } from './event-log-load.js'
import { quarantineRecord } from './event-quarantine.js'
import { readRecords } from './event-records.js'
import { type Segment, Segments } from './event-segments.js'
import { keyLine, type LogCopy } from './key-format.js'
import { LogExtent } from './log-extent.js'

export type { LoadedLog } from './event-log-load.js'

/** The segment number of an event this log never wrote (see `keep`). */
const UNLOGGED = 0xffffffff
/** Bodies of the newest events kept in memory, for live streams: at most this many bytes. */
const RECENT_BYTES = 1024 * 1024

/** A new segment is started past this size or age, so that retention can drop whole old ones. */
export interface EventLogOptions {
  readonly segmentBytes?: number
  readonly segmentMs?: number
  readonly now?: () => number
  /** Where damaged records are copied (DATA_DIR/quarantine); undefined: they are only logged. */
  readonly quarantineDir?: string
  readonly logger?: Logger
  /** Told how long each append's fdatasync took. */
  readonly timings?: DurableWriteObserver
}

/**
 * The file store's change feed on disk: `DATA_DIR/events/<first id>.ndjson` segments, one JSON
 * line per event, or `{"void":"<id>"}` for an event whose change was never made, each event
 * perhaps after the line of the `Idempotency-Key` kept with its change. Appends are
 * group-committed (SegmentAppender). Memory holds an index of where each event is (EventIndex)
 * and a small cache of the newest bodies; pages read the rest from the segments.
 */
export class EventLog implements EventBodies {
  readonly dir: string
  readonly #now: () => number
  readonly #quarantineDir: string | undefined
  readonly #logger: Logger
  readonly #segments = new Segments()
  readonly #appender: SegmentAppender
  /** The newest bodies by slot, oldest first, and their bytes. */
  readonly #recent = new Map<number, { event: ChangeEvent; bytes: number }>()
  #recentBytes = 0
  /** Events committed without having been appended here (a durability that keeps them elsewhere). */
  readonly #unlogged = new Map<number, ChangeEvent>()

  constructor(dir: string, options: EventLogOptions = {}) {
    this.dir = dir
    this.#now = options.now ?? Date.now
    this.#quarantineDir = options.quarantineDir
    this.#logger = options.logger ?? silentLogger
    this.#appender = new SegmentAppender(dir, this.#segments, {
      segmentBytes: options.segmentBytes ?? 16 * 1024 * 1024,
      segmentMs: options.segmentMs ?? 60 * 60 * 1000,
      now: this.#now,
      timings: options.timings ?? UNOBSERVED,
    })
  }

  /** Reads every segment into `index` (see loadSegments). */
  load(index: EventIndex, isMade: (event: EventHead) => boolean): Promise<LoadedLog> {
    return loadSegments(
      {
        dir: this.dir,
        segments: this.#segments,
        now: this.#now,
        logger: this.#logger,
        quarantine: (record) => quarantineRecord(this.#quarantineDir, this.#logger, record),
      },
      index,
      isMade,
    )
  }

  /** The highest event id durable in the log. */
  get highest(): number {
    return this.#segments.highest
  }

  /** Where the log ends now: taken at open, before anything is appended, it is the log as loaded. */
  extent(): LogExtent {
    return new LogExtent(this.#segments.list)
  }

  /**
   * Appends the event, with the line of its request's key just before it when it has one (the
   * same write and fdatasync: both or neither); resolves once durable, with where the key's line
   * is. A failure is a WriteError.
   */
  async append(event: ChangeEvent, keyJson?: string): Promise<LogCopy | undefined> {
    const line = `${eventJson(event)}\n`
    if (keyJson === undefined) {
      await this.#appender.enqueue(Buffer.from(line), event)
      return undefined
    }
    const key = keyLine(keyJson, event.id)
    return this.#appender.enqueue(Buffer.from(key + line), event, Buffer.byteLength(key))
  }

  /** Durably marks the event as never having happened. */
  async void(id: string): Promise<void> {
    await this.#appender.enqueue(Buffer.from(`{"void":"${id}"}\n`), undefined)
  }

  keep(slot: number, event: ChangeEvent): EventPlace {
    const place = this.#appender.take(eventIdNumber(event.id))
    if (place === undefined) {
      this.#unlogged.set(slot, event)
      return { segment: UNLOGGED, offset: 0, bytes: Buffer.byteLength(eventJson(event)) }
    }
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
    this.#appender.forget(eventIdNumber(event.id))
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
      const segment = this.#segments.bySerial(serial)
      if (segment === undefined) return undefined
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
   * looks for a body in a file that is gone (one that looked already is read again). A segment
   * with events past `checkpoint` is kept: a replay may still need them.
   */
  async prune(cutoff: string, checkpoint: number, drop: (through: number) => void): Promise<void> {
    const segments = this.#segments.list
    const old = (segment: Segment | undefined): boolean =>
      segment !== undefined && segment.lastTime < cutoff && segment.last <= checkpoint
    let count = 0
    while (count < segments.length - 1 && old(segments[count])) count += 1
    const next = segments[count]
    if (count === 0 || next === undefined) return
    const removed = segments.splice(0, count)
    drop(next.first - 1)
    for (const segment of removed) await unlink(path.join(this.dir, segment.name))
    syncDirectorySync(this.dir)
  }

  close(): Promise<void> {
    return this.#appender.close()
  }
}
