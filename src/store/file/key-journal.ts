import { open as openFile, readdir, unlink } from 'node:fs/promises'
import path from 'node:path'

import { isExpired, type KeptKey } from '../../domain/kept-key.js'
import { NameFilter } from '../name-filter.js'
import { WriteError } from '../write-error.js'
import type { DurableDirectory } from './atomic-write.js'
import { hasCode, namingFile } from './errno.js'
import { journalCopy, journalJson, journalLine, type LogCopy, parseKeptKey } from './key-format.js'
import {
  cutTornTail,
  type DroppedLine,
  dropJournalLines,
  journalEnd,
  journalName,
} from './key-journal-files.js'
import { LogCopyBlanker } from './key-log-copies.js'
import type { LogExtent } from './log-extent.js'
import { APPEND_OWN } from './own-files.js'
import { readLines } from './segment-lines.js'

const SPACE = 0x20
const TAB = 0x09
/** A line's name: the key's SHA-256 in hex (keyDigest). */
const DIGEST_LENGTH = 64
/**
 * Each journal's own filter of names: 1 KiB, so that the most journals kept (2,880 for keys kept a
 * day) take under 3 MiB whatever the number of keys; with a few thousand keys in one, most
 * lookups still pass it by.
 */
const JOURNAL_FILTER_BITS = 13
/** Journals read at once when their names are read. */
const READERS = 8

/**
 * A key to append: its name (keyDigest), the key, its JSON (keptKeyJson) and, for a key kept with
 * a change, where its key line is in the event log.
 */
export interface JournalEntry {
  readonly name: string
  readonly kept: KeptKey
  readonly json: string
  readonly copy?: LogCopy | undefined
}

/**
 * The file store's kept keys on disk (docs/operations.md): appended to one journal per 30 s of
 * expiry, a line per key (journalLine: `<sha-256> <JSON>`, then where the event log's copy of it
 * is), so that keeping a key creates no file and a checkpoint fsyncs one or two journals however
 * many keys it covers. Appends are unsynced: the event log holds every key kept with a change
 * until the checkpoint has fsynced its journal, and a start's replay appends again the keys past
 * the checkpoint (a key may so have two lines; both say the same). A journal whose span has passed
 * holds only expired keys: the log's copies of them are blanked, then it is deleted whole. A crash
 * can leave a journal's last line torn: it is cut off before this process first appends to that
 * journal (reads pass over it), and a failed append is cut off before the next one, so that every
 * line but the last starts with a name.
 */
export class KeyJournal {
  readonly #dir: DurableDirectory
  readonly #eventsDir: string
  /** The bytes of whole lines in each journal this process knows of. */
  readonly #sizes = new Map<string, number>()
  /** Journals whose last append failed: cut back to their size before the next one. */
  readonly #torn = new Set<string>()
  /**
   * Per journal, a filter of every name in it: a lookup reads only the journals whose filter may
   * hold its key. A journal without one (not read since open) is read.
   */
  readonly #filters = new Map<string, NameFilter>()
  /** Filters being built by eachName, told of the names appended meanwhile too. */
  readonly #building = new Map<string, NameFilter>()
  /** The log as loaded: a line written before this process's appends whose copy it lacks is dropped. */
  readonly #extent: LogExtent | undefined
  #appending: Promise<unknown> = Promise.resolve()

  constructor(dir: DurableDirectory, eventsDir: string, extent?: LogExtent) {
    this.#dir = dir
    this.#eventsDir = eventsDir
    this.#extent = extent
  }

  /**
   * Appends the keys (one append per journal, queued behind any running one) and returns the
   * journals written, for the checkpoint to fsync; `durable`: fsynced now, and the directory with
   * them when one is new. A failure is a WriteError: nothing of it counts.
   */
  append(entries: readonly JournalEntry[], durable = false): Promise<string[]> {
    const run = this.#appending.then(() => this.#appendNow(entries, durable))
    this.#appending = run.catch(() => undefined)
    return run
  }

  async #appendNow(entries: readonly JournalEntry[], durable: boolean): Promise<string[]> {
    const byJournal = new Map<string, JournalEntry[]>()
    for (const entry of entries) {
      const journal = journalName(entry.kept.expiresAt)
      const batch = byJournal.get(journal) ?? []
      batch.push(entry)
      byJournal.set(journal, batch)
    }
    let created = false
    for (const [journal, batch] of byJournal) {
      const fresh = await this.#isNew(journal)
      created ||= fresh
      // A new journal's filter is whole from its first line.
      if (fresh) this.#filters.set(journal, new NameFilter(JOURNAL_FILTER_BITS))
      await this.#appendTo(
        journal,
        batch.map(({ name, json, copy }) => journalLine(name, json, copy)).join(''),
        durable,
      )
      // After the write: a reading of the journal's names that began before it may have missed it.
      for (const { name } of batch) {
        this.#filters.get(journal)?.add(name)
        this.#building.get(journal)?.add(name)
      }
    }
    if (durable && created) await this.#dir.sync()
    return [...byJournal.keys()]
  }

  async #appendTo(journal: string, text: string, durable: boolean): Promise<void> {
    const size = this.#sizes.get(journal) ?? 0
    this.#extent?.appending(journal, size)
    const bytes = Buffer.from(text, 'utf8')
    let step: 'write' | 'file-sync' = 'write'
    try {
      const handle = await openFile(path.join(this.#dir.path, journal), APPEND_OWN, 0o600)
      try {
        if (this.#torn.has(journal)) await handle.truncate(size)
        this.#torn.add(journal)
        await handle.writeFile(bytes)
        if (durable) {
          step = 'file-sync'
          await handle.sync()
        }
      } catch (error) {
        // At once, so that a restart does not find what was refused (else before the next append).
        if (
          await handle.truncate(size).then(
            () => true,
            () => false,
          )
        )
          this.#torn.delete(journal)
        throw error
      } finally {
        await handle.close()
      }
    } catch (error) {
      throw new WriteError(step, error)
    }
    this.#torn.delete(journal)
    this.#sizes.set(journal, size + bytes.length)
  }

  /**
   * Whether the journal is not there yet. One this process has not appended to yet gets its torn
   * last line cut off first (a crash's), so that the next line starts a line of its own.
   */
  async #isNew(journal: string): Promise<boolean> {
    if (this.#sizes.has(journal)) return false
    try {
      this.#sizes.set(journal, await cutTornTail(path.join(this.#dir.path, journal)))
      return false
    } catch (error) {
      if (hasCode(error, 'ENOENT')) return true
      throw new WriteError('write', error)
    }
  }

  /** The key named (keyDigest) while it is kept at `now`, from the journals not yet expired. */
  async find(name: string, now: number): Promise<KeptKey | undefined> {
    const digest = Buffer.from(`${name} `, 'latin1')
    let found: KeptKey | undefined
    for (const journal of await this.#journals(now, 'live')) {
      if (this.#filters.get(journal)?.mightHold(name) === false) continue
      await this.#eachLine(journal, (line, offset) => {
        if (found !== undefined || line.length <= digest.length) return
        if (line.compare(digest, 0, digest.length, 0, digest.length) !== 0) return
        if (this.#extent?.drops(journal, line, offset) === true) return
        const kept = parseKeptKey(journalJson(line, digest.length).toString('utf8'))
        if (kept !== undefined && !isExpired(kept, now)) found = kept
      })
      if (found !== undefined) return found
    }
    return undefined
  }

  /**
   * Calls `name` with the name (keyDigest) of every key in the journals not yet expired, building
   * each one's filter on the way, and drops the lines of keys stored without their change; how many.
   */
  async eachName(now: number, name: (name: string) => void): Promise<number> {
    const journals = await this.#journals(now, 'live')
    let dropped = 0
    // A few at once: a day of journals is 2,880 files, whose opens dominate.
    const reader = async (): Promise<void> => {
      for (let journal = journals.pop(); journal !== undefined; journal = journals.pop())
        dropped += await this.#readNames(journal, name).catch((error: unknown) => {
          throw namingFile(error, path.join(this.#dir.path, journal))
        })
    }
    await Promise.all(Array.from({ length: READERS }, reader))
    return dropped
  }

  /** Reads a journal's names into its filter (told of later appends too), and drops as above. */
  async #readNames(journal: string, name: (name: string) => void): Promise<number> {
    const filter = new NameFilter(JOURNAL_FILTER_BITS)
    const dropped: DroppedLine[] = []
    this.#building.set(journal, filter)
    try {
      await this.#eachLine(journal, (line, offset) => {
        if (line.length <= DIGEST_LENGTH || line[DIGEST_LENGTH] !== SPACE) return
        if (this.#extent?.drops(journal, line, offset) === true) {
          dropped.push({ offset, tab: line.lastIndexOf(TAB) })
          return
        }
        const read = line.toString('latin1', 0, DIGEST_LENGTH)
        filter.add(read)
        name(read)
      })
      if (dropped.length > 0)
        await dropJournalLines(path.join(this.#dir.path, journal), dropped, DIGEST_LENGTH)
    } finally {
      this.#building.delete(journal)
    }
    this.#filters.set(journal, filter)
    return dropped.length
  }

  /**
   * Deletes the journals whose keys have all expired, each after the log's copies of its keys are
   * blanked durably (the unlink is unsynced: a journal back after a power loss has still expired,
   * and its copies are blanked already); how many.
   */
  async sweep(now: number): Promise<number> {
    let removed = 0
    for (const journal of await this.#journals(now, 'passed')) {
      await this.#blankCopies(journal)
      await unlink(path.join(this.#dir.path, journal)).then(
        () => {
          removed += 1
        },
        (error: unknown) => {
          if (!hasCode(error, 'ENOENT')) throw error
        },
      )
      this.#sizes.delete(journal)
      this.#torn.delete(journal)
      this.#filters.delete(journal)
    }
    return removed
  }

  /** Blanks the event log's copies of the journal's keys (LogCopyBlanker), durably. */
  async #blankCopies(journal: string): Promise<void> {
    const blanker = new LogCopyBlanker(this.#eventsDir)
    try {
      await this.#eachLine(journal, (line) => {
        const copy = journalCopy(line)
        if (copy === undefined || line.length <= DIGEST_LENGTH) return undefined
        return blanker.blank(copy, journalJson(line, DIGEST_LENGTH + 1))
      })
      await blanker.sync()
    } finally {
      await blanker.close()
    }
  }

  /** The journals whose span ends after `now` (live) or by it (passed), newest first. */
  async #journals(now: number, which: 'live' | 'passed'): Promise<string[]> {
    const live = which === 'live'
    // Newest first: a key kept again after it expired is in a later journal.
    return (await readdir(this.#dir.path))
      .filter((name) => {
        const end = journalEnd(name)
        if (end === undefined) return false
        return live ? end > now : end <= now
      })
      .sort()
      .reverse()
  }

  /** Every whole line of a journal, and its offset, up to what this process appended (gone: none). */
  async #eachLine(
    journal: string,
    line: (bytes: Buffer, offset: number) => void | Promise<void>,
  ): Promise<void> {
    try {
      await readLines(path.join(this.#dir.path, journal), line)
    } catch (error) {
      if (!hasCode(error, 'ENOENT')) throw error
    }
  }
}
