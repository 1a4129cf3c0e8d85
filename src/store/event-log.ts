import { readFileSync, readdirSync, statSync, truncateSync } from 'node:fs'
import { open, unlink, type FileHandle } from 'node:fs/promises'
import path from 'node:path'

import { eventJson, formatEventId, parseEvent, parseEventId, type ChangeEvent } from '../events/event.js'
import { syncDirectorySync, WriteError } from './atomic-write.js'

const SEGMENT = /^([0-9a-f]{16})\.ndjson$/

/** A new segment is started past this size or age, so that retention can drop whole old ones. */
export interface EventLogOptions {
  readonly segmentBytes?: number
  readonly segmentMs?: number
  readonly now?: () => number
}

interface Segment {
  readonly name: string
  /** The first id the segment may hold. */
  readonly first: number
  /** The highest event id in it, 0 when none; the newest event time in it. */
  last: number
  lastTime: string
  bytes: number
  readonly opened: number
}

export interface LoadedLog {
  /** Every whole event line, in id order, with those voided left out. */
  readonly events: ChangeEvent[]
  readonly nextId: number
  /** Every id up to this one was pruned (the first segment's first id - 1). */
  readonly prunedThrough: number
}

/**
 * The file store's change feed on disk: `DATA_DIR/events/<first id>.ndjson` segments, one JSON
 * line per event, or `{"void":"<id>"}` for an event whose change was never made. Appends are
 * group-committed: every line waiting when a batch starts is written with one write and one
 * fdatasync, shared by all the writers in it.
 */
export class EventLog {
  readonly dir: string
  readonly #segmentBytes: number
  readonly #segmentMs: number
  readonly #now: () => number
  readonly #segments: Segment[] = []
  #handle: FileHandle | undefined
  #waiting: { line: string, event: ChangeEvent | undefined, resolve: () => void, reject: (error: unknown) => void }[] = []
  #flushing = false
  /** The highest event id ever appended. */
  #highest = 0

  constructor(dir: string, options: EventLogOptions = {}) {
    this.dir = dir
    this.#segmentBytes = options.segmentBytes ?? 16 * 1024 * 1024
    this.#segmentMs = options.segmentMs ?? 60 * 60 * 1000
    this.#now = options.now ?? Date.now
  }

  /**
   * Reads every segment. A torn last line (a crash during a write that was never acknowledged)
   * is cut off; every later start then sees whole lines only.
   */
  load(): LoadedLog {
    const names = readdirSync(this.dir).filter((name) => SEGMENT.test(name)).sort()
    const events: ChangeEvent[] = []
    const voided = new Set<string>()
    let maxId = 0
    for (const name of names) {
      const file = path.join(this.dir, name)
      const text = readFileSync(file, 'utf8')
      const end = text.lastIndexOf('\n') + 1
      if (end < text.length) truncateSync(file, Buffer.byteLength(text.slice(0, end)))
      const segment: Segment = { name, first: parseEventId(name.slice(0, 16)), last: 0, lastTime: '', bytes: end, opened: this.#now() }
      for (const line of text.slice(0, end).split('\n')) {
        if (line === '') continue
        const gone = /^\{"void":"([0-9a-f]{16})"\}$/.exec(line)?.[1]
        if (gone !== undefined) {
          voided.add(gone)
          continue
        }
        const event = parseEvent(line)
        if (event === undefined) continue
        events.push(event)
        const id = parseEventId(event.id)
        segment.last = Math.max(segment.last, id)
        if (event.time > segment.lastTime) segment.lastTime = event.time
        maxId = Math.max(maxId, id)
      }
      this.#segments.push(segment)
    }
    const lastSegment = this.#segments.at(-1)
    const nextId = Math.max(maxId + 1, lastSegment?.first ?? 1)
    this.#highest = nextId - 1
    events.sort((a, b) => (a.id < b.id ? -1 : 1))
    return {
      events: events.filter((event) => !voided.has(event.id)),
      nextId,
      prunedThrough: (this.#segments[0]?.first ?? nextId) - 1,
    }
  }

  /** Appends the event; resolves once it is durable. A failure is a WriteError. */
  append(event: ChangeEvent): Promise<void> {
    return this.#enqueue(`${eventJson(event)}\n`, event)
  }

  /** Durably marks the event as never having happened. */
  void(id: string): Promise<void> {
    return this.#enqueue(`{"void":"${id}"}\n`, undefined)
  }

  #enqueue(line: string, event: ChangeEvent | undefined): Promise<void> {
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
        await this.#writeBatch(batch.map((entry) => entry.line).join(''), batch)
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

  async #writeBatch(text: string, batch: readonly { event: ChangeEvent | undefined }[]): Promise<void> {
    const segment = await this.#activeSegment()
    const handle = this.#handle
    if (handle === undefined) throw new Error('the event log is closed')
    const data = Buffer.from(text)
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
    segment.bytes += data.length
    for (const { event } of batch) {
      if (event === undefined) continue
      segment.last = Math.max(segment.last, parseEventId(event.id))
      this.#highest = Math.max(this.#highest, segment.last)
      if (event.time > segment.lastTime) segment.lastTime = event.time
    }
  }

  /**
   * The segment to append to: a new one, named by the next id, when the current one holds events
   * and is too big or too old. Names therefore grow, and a segment's name is at most its first id.
   */
  async #activeSegment(): Promise<Segment> {
    const current = this.#segments.at(-1)
    const roll = current === undefined
      || (current.last > 0 && (current.bytes >= this.#segmentBytes || this.#now() - current.opened >= this.#segmentMs))
    if (!roll && this.#handle !== undefined) return current
    await this.#handle?.close()
    this.#handle = undefined
    const first = roll ? this.#highest + 1 : current.first
    const name = `${formatEventId(first)}.ndjson`
    const reuse = !roll
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
    if (reuse) return current
    const bytes = statSync(path.join(this.dir, name)).size
    const segment: Segment = { name, first, last: 0, lastTime: '', bytes, opened: this.#now() }
    this.#segments.push(segment)
    return segment
  }

  /**
   * Removes every closed segment whose newest event is older than `cutoff` (oldest first, never the
   * one appended to); returns the highest id removed, or undefined when none was.
   */
  async prune(cutoff: string): Promise<string | undefined> {
    let through: number | undefined
    while (this.#segments.length > 1) {
      const oldest = this.#segments[0]
      const next = this.#segments[1]
      if (oldest === undefined || next === undefined || oldest.lastTime >= cutoff) break
      await unlink(path.join(this.dir, oldest.name))
      this.#segments.shift()
      through = next.first - 1
    }
    if (through !== undefined) syncDirectorySync(this.dir)
    return through === undefined ? undefined : formatEventId(through)
  }

  async close(): Promise<void> {
    const handle = this.#handle
    this.#handle = undefined
    await handle?.close()
  }
}
