/**
 * What a file store's data directory holds, read and changed behind the store's back for the
 * write-ahead-log recovery tests: the event log and the checkpoint as the files say, the inodes
 * of the user files, and the files a power loss may leave.
 */
import assert from 'node:assert/strict'
import { readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import path from 'node:path'

import type { ChangeEvent } from '../../src/domain/event.js'

const USER_FILE = /^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.json$/
const SEGMENT = /^[0-9a-f]{16}\.ndjson$/
const VOID = /^\{"void":"([0-9a-f]{16})"\}$/
/** The temp file of a checkpoint's write, in the data directory until its rename. */
export const CHECKPOINT_TEMP = /^\.checkpoint\.json\.[0-9a-f]+\.tmp$/

/** An event as the log on disk holds it, with its user parsed. */
export interface LoggedEvent {
  readonly id: string
  readonly type: ChangeEvent['type']
  readonly userId: string
  readonly version: number
  readonly user?: Record<string, unknown>
  /** The whole line, for tests that copy it. */
  readonly line: string
}

export interface LogOnDisk {
  readonly segments: string[]
  /** Every whole event line, voided or not, in file order (key lines left out). */
  readonly events: LoggedEvent[]
  readonly voided: Set<string>
  /** The highest event id in a whole line ('' when none). */
  readonly highest: string
}

/** Reads every segment of `DATA_DIR/events` (a torn last line is left out, as the store does). */
export function readLog(dataDir: string): LogOnDisk {
  const dir = path.join(dataDir, 'events')
  const segments = readdirSync(dir)
    .filter((name) => SEGMENT.test(name))
    .sort()
  const events: LoggedEvent[] = []
  const voided = new Set<string>()
  let highest = ''
  for (const name of segments) {
    const text = readFileSync(path.join(dir, name), 'utf8')
    for (const line of text.slice(0, text.lastIndexOf('\n') + 1).split('\n')) {
      if (line === '') continue
      const gone = VOID.exec(line)?.[1]
      if (gone !== undefined) {
        voided.add(gone)
        continue
      }
      // A kept Idempotency-Key's line, just before its event's: not an event.
      if (line.startsWith('{"key":')) continue
      const event = JSON.parse(line) as Omit<LoggedEvent, 'line'>
      events.push({ ...event, line })
      if (event.id > highest) highest = event.id
    }
  }
  return { segments, events, voided, highest }
}

/** The id `DATA_DIR/checkpoint.json` holds, 'damaged', or undefined when there is none. */
export function readCheckpointFile(dataDir: string): string | undefined {
  let text: string
  try {
    text = readFileSync(path.join(dataDir, 'checkpoint.json'), 'utf8')
  } catch {
    return undefined
  }
  return /^\{"through":"([0-9a-f]{16})"\}\n$/.exec(text)?.[1] ?? 'damaged'
}

/** The inode of every user file and tombstone, to tell a file written again from one left alone. */
export function fileInodes(dataDir: string): Map<string, number> {
  const inodes = new Map<string, number>()
  for (const folder of ['users', 'tombstones']) {
    const dir = path.join(dataDir, folder)
    for (const name of readdirSync(dir)) {
      if (USER_FILE.test(name)) inodes.set(`${folder}/${name}`, statSync(path.join(dir, name)).ino)
    }
  }
  return inodes
}

/** The last event (not voided) the log holds for each user. */
export function lastEvents(log: LogOnDisk): Map<string, LoggedEvent> {
  const last = new Map<string, LoggedEvent>()
  for (const event of log.events) if (!log.voided.has(event.id)) last.set(event.userId, event)
  return last
}

/** Every user file is whole JSON of its own id; every tombstone whole; no temp file, no quarantine. */
export function checkFiles(dataDir: string, label: string): void {
  for (const folder of ['users', 'tombstones'] as const) {
    for (const name of readdirSync(path.join(dataDir, folder))) {
      const id = USER_FILE.exec(name)?.[1]
      assert.ok(id !== undefined, `${label}: an unexpected file in ${folder}/: ${name}`)
      const text = readFileSync(path.join(dataDir, folder, name), 'utf8')
      let parsed: Record<string, unknown> | undefined
      try {
        parsed = JSON.parse(text) as Record<string, unknown>
      } catch {
        assert.fail(`${label}: ${folder}/${name} is not whole JSON: ${text.slice(0, 120)}`)
      }
      assert.equal(parsed['id'], id, `${label}: ${folder}/${name} names another id`)
      if (folder === 'users')
        assert.equal(typeof parsed['version'], 'number', `${label}: ${name} has no version`)
    }
  }
  assert.deepEqual(
    readdirSync(dataDir).filter((name) => name === 'quarantine'),
    [],
    `${label}: something was quarantined`,
  )
  for (const folder of ['', 'events']) {
    const temps = readdirSync(path.join(dataDir, folder)).filter((name) => name.endsWith('.tmp'))
    assert.deepEqual(temps, [], `${label}: temp files left in ${folder || 'the data directory'}`)
  }
}

/**
 * Puts every user changed past the checkpoint back as the checkpoint found it, as a power loss
 * may leave files renamed but never synced: its file at its last version up to the checkpoint, or
 * none when it was created after, and no tombstone. Returns how many users it put back.
 */
export function revertPastCheckpoint(dataDir: string): number {
  const through = readCheckpointFile(dataDir)
  if (through === undefined || through === 'damaged') throw new Error(`no checkpoint: ${through}`)
  const log = readLog(dataDir)
  const before = new Map<string, LoggedEvent>()
  const after = new Set<string>()
  for (const event of log.events) {
    if (log.voided.has(event.id)) continue
    if (event.id <= through) before.set(event.userId, event)
    else after.add(event.userId)
  }
  for (const id of after) {
    rmSync(path.join(dataDir, 'tombstones', `${id}.json`), { force: true })
    const user = before.get(id)?.user
    const file = path.join(dataDir, 'users', `${id}.json`)
    if (user === undefined) rmSync(file, { force: true })
    else writeFileSync(file, JSON.stringify(user))
  }
  return after.size
}
