import { statSync } from 'node:fs'
import { type FileHandle, open } from 'node:fs/promises'
import path from 'node:path'
import { performance } from 'node:perf_hooks'

import { type ChangeEvent, eventIdNumber, formatEventId } from '../../domain/event.js'
import type { EventPlace } from '../feed/event-index.js'
import { WriteError } from '../write-error.js'
import { type DurableWriteObserver, reportDurableWrite } from '../write-timing.js'
import { syncDirectorySync } from './atomic-write.js'
import { isShortOfResources } from './errno.js'
import type { Segment, Segments } from './event-segments.js'
import { READ_APPEND_OWN } from './own-files.js'

/** Where an append's first line starts: the segment's file name and the byte offset in it. */
export interface LineStart {
  readonly segment: string
  readonly offset: number
}

interface Waiting {
  readonly line: Buffer
  readonly event: ChangeEvent | undefined
  /** Bytes before the event's own line (its key's line, written in the same append). */
  readonly skip: number
  readonly resolve: (start: LineStart) => void
  readonly reject: (error: unknown) => void
}

export interface AppendOptions {
  readonly segmentBytes: number
  readonly segmentMs: number
  readonly now: () => number
  readonly timings: DurableWriteObserver
}

/**
 * Appends lines to the newest segment, group-committed: every line waiting when a batch starts is
 * written with one write and one fdatasync, shared by all the writers in it.
 */
export class SegmentAppender {
  readonly #dir: string
  readonly #segments: Segments
  readonly #options: AppendOptions
  #handle: FileHandle | undefined
  #waiting: Waiting[] = []
  #flushing = false
  /** Where each appended event landed, until the journal keeps it (or discards it). */
  readonly #placed = new Map<number, EventPlace>()

  constructor(dir: string, segments: Segments, options: AppendOptions) {
    this.#dir = dir
    this.#segments = segments
    this.#options = options
  }

  /**
   * Appends the lines (of `event`, after `skip` bytes of its key's line, or a void); resolves once
   * they are durable, with where they start. They go in one write: a crash leaves a prefix of
   * them, never a mix.
   */
  enqueue(line: Buffer, event: ChangeEvent | undefined, skip = 0): Promise<LineStart> {
    return new Promise((resolve, reject) => {
      this.#waiting.push({ line, event, skip, resolve, reject })
      if (!this.#flushing) void this.#flush()
    })
  }

  /** Where the appended event with this id landed, forgotten once told; undefined: not here. */
  take(id: number): EventPlace | undefined {
    const place = this.#placed.get(id)
    if (place !== undefined) this.#placed.delete(id)
    return place
  }

  forget(id: number): void {
    this.#placed.delete(id)
  }

  async #flush(): Promise<void> {
    this.#flushing = true
    while (this.#waiting.length > 0) {
      const batch = this.#waiting
      this.#waiting = []
      try {
        const { segment, offset } = await this.#writeBatch(batch)
        let at = offset
        for (const entry of batch) {
          entry.resolve({ segment, offset: at })
          at += entry.line.length
        }
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

  /** Writes and syncs the batch; where it starts. */
  async #writeBatch(batch: readonly Waiting[]): Promise<LineStart> {
    const segment = await this.#activeSegment()
    const handle = this.#handle
    if (handle === undefined) throw new Error('the event log is closed')
    const data =
      batch.length === 1 && batch[0] !== undefined
        ? batch[0].line
        : Buffer.concat(batch.map((entry) => entry.line))
    try {
      // A full disk may take part of a write: what it took is written again after the cut below.
      for (let written = 0; written < data.length; ) {
        const { bytesWritten } = await handle.write(data, written, data.length - written)
        if (bytesWritten === 0) throw new Error('the disk took no byte of the write')
        written += bytesWritten
      }
    } catch (error) {
      await this.#cutBack(handle, segment)
      throw new WriteError('write', error, false)
    }
    const syncStarted = performance.now()
    try {
      await handle.datasync()
    } catch (error) {
      throw new WriteError('file-sync', error, false)
    } finally {
      reportDurableWrite(this.#options.timings, 'log-sync', this.#dir, syncStarted)
    }
    const start = { segment: segment.name, offset: segment.bytes }
    let offset = segment.bytes
    for (const { event, line, skip } of batch) {
      if (event !== undefined) {
        const id = eventIdNumber(event.id)
        this.#placed.set(id, {
          segment: segment.serial,
          offset: offset + skip,
          bytes: line.length - skip - 1,
        })
        segment.last = Math.max(segment.last, id)
        this.#segments.highest = Math.max(this.#segments.highest, segment.last)
        if (event.time > segment.lastTime) segment.lastTime = event.time
      }
      offset += line.length
    }
    segment.bytes += data.length
    return start
  }

  /**
   * Cuts a failed batch's bytes off the segment: the next batch (after a full disk has room again)
   * must start on a line of its own, or its first event would be read as part of a damaged line.
   * When even that fails, nothing more may be appended here: a failed sync says so (read-only).
   */
  async #cutBack(handle: FileHandle, segment: Segment): Promise<void> {
    try {
      await handle.truncate(segment.bytes)
    } catch (error) {
      throw new WriteError('file-sync', error, false)
    }
  }

  /**
   * The segment to append to: a new one, named by the next id, when the current one holds events
   * and is too big or too old. Names therefore grow, and a segment's name is at most its first id.
   */
  async #activeSegment(): Promise<Segment> {
    const { segmentBytes, segmentMs, now } = this.#options
    const current = this.#segments.list.at(-1)
    const roll =
      current === undefined ||
      (current.last > 0 && (current.bytes >= segmentBytes || now() - current.opened >= segmentMs))
    if (!roll && this.#handle !== undefined) return current
    await this.#handle?.close()
    this.#handle = undefined
    const first = roll ? this.#segments.highest + 1 : current.first
    const name = `${formatEventId(first)}.ndjson`
    let handle: FileHandle
    try {
      handle = await open(path.join(this.#dir, name), READ_APPEND_OWN, 0o600)
    } catch (error) {
      throw new WriteError('write', error, false)
    }
    if (roll) {
      try {
        // The new name must survive a crash before any event in it is acknowledged.
        syncDirectorySync(this.#dir)
      } catch (error) {
        await handle.close()
        // Opening the directory may fail for want of a descriptor (the new segment took the last
        // one): nothing was synced, so the next append tries again, where a failed fsync turns
        // the store read-only.
        throw new WriteError(isShortOfResources(error) ? 'write' : 'dir-sync', error, false)
      }
    }
    this.#handle = handle
    if (!roll) return current
    const bytes = statSync(path.join(this.#dir, name)).size
    const segment = this.#segments.make(name, first, bytes, now())
    this.#segments.push(segment)
    return segment
  }

  async close(): Promise<void> {
    const handle = this.#handle
    this.#handle = undefined
    await handle?.close()
  }
}
