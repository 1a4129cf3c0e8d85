/**
 * The kept keys' journal files (KeyJournal): the name a key of a given expiry goes to, when a
 * journal's keys have all expired, the check at start that each may be read, the cut of the torn
 * last line a crash can leave, and the lines dropped in place.
 */
import { accessSync, constants, readdirSync } from 'node:fs'
import { open, stat } from 'node:fs/promises'
import path from 'node:path'

import { WriteError } from '../write-error.js'
import { UPDATE_OWN } from './own-files.js'

/**
 * The stretch of expiries a journal holds: with the sweep every 30 s, an expired key leaves
 * storage within a minute.
 */
const JOURNAL_SPAN_MS = 30_000
/** A journal's name: when the span of expiries it holds starts, UTC (`YYYYMMDDTHHMMSS`). */
const JOURNAL = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})\.keys$/
/** How far back a torn tail is looked for at once. */
const TAIL_CHUNK = 64 * 1024
const NEWLINE = 0x0a
/** What a dropped line holds instead of the space after its name and the tab before its copy. */
const DROPPED = Buffer.from('#', 'latin1')

/** A journal line to drop: where it starts, and where its tab is within it (-1: it has none). */
export interface DroppedLine {
  readonly offset: number
  readonly tab: number
}

/** The journal a key of this expiry goes to: `DATA_DIR/keys/<YYYYMMDDTHHMMSS>.keys` (UTC). */
export function journalName(expiresAt: number): string {
  const start = new Date(Math.floor(expiresAt / JOURNAL_SPAN_MS) * JOURNAL_SPAN_MS).toISOString()
  return `${start.slice(0, 19).replace(/[-:]/g, '')}.keys`
}

/** When every key of a journal has expired; undefined for a name that is not a journal's. */
export function journalEnd(name: string): number | undefined {
  const parts = JOURNAL.exec(name)
  if (parts === null) return undefined
  const [, year, month, day, hours, minutes, seconds] = parts
  const start = Date.parse(`${year}-${month}-${day}T${hours}:${minutes}:${seconds}Z`)
  return Number.isFinite(start) ? start + JOURNAL_SPAN_MS : undefined
}

/** Cuts a journal back to its last newline (a crash's torn append); its size after. */
export async function cutTornTail(file: string): Promise<number> {
  const { size } = await stat(file)
  const handle = await open(file, UPDATE_OWN)
  try {
    const chunk = Buffer.allocUnsafe(TAIL_CHUNK)
    let end = size
    while (end > 0) {
      const start = Math.max(0, end - TAIL_CHUNK)
      const { bytesRead } = await handle.read(chunk, 0, end - start, start)
      const last = chunk.subarray(0, bytesRead).lastIndexOf(NEWLINE)
      if (last !== -1) {
        end = start + last + 1
        break
      }
      end = start
    }
    if (end < size) {
      await handle.truncate(end)
      // Durably cut before anything is appended: a torn line come back would swallow the next.
      await handle.sync()
    }
    return end
  } finally {
    await handle.close()
  }
}

/**
 * Throws, naming the file, for the first journal in `dir` this process may not read (nor append
 * to, for one still live at `now`): a start refuses it as it refuses an unreadable user file,
 * rather than answer keyed requests with errors later. One access(2) a journal, nothing read.
 */
export function checkJournalAccess(dir: string, now: number): void {
  for (const name of readdirSync(dir)) {
    const end = journalEnd(name)
    if (end === undefined) continue
    accessSync(path.join(dir, name), end > now ? constants.R_OK | constants.W_OK : constants.R_OK)
  }
}

/**
 * Drops lines of a journal in place, durably: the space after each one's name and the tab before
 * its copy are overwritten (the same number of bytes, so no line moves), so that no lookup or
 * reading of names matches it and no sweep blanks its copy. Either byte alone is enough: a torn
 * overwrite drops the line all the same. A failure is a WriteError.
 */
export async function dropJournalLines(
  file: string,
  lines: readonly DroppedLine[],
  nameLength: number,
): Promise<void> {
  let step: 'write' | 'file-sync' = 'write'
  try {
    const handle = await open(file, UPDATE_OWN)
    try {
      for (const { offset, tab } of lines) {
        await handle.write(DROPPED, 0, 1, offset + nameLength)
        if (tab !== -1) await handle.write(DROPPED, 0, 1, offset + tab)
      }
      step = 'file-sync'
      await handle.datasync()
    } finally {
      await handle.close()
    }
  } catch (error) {
    throw new WriteError(step, error)
  }
}
