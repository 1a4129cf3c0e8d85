import { closeSync, mkdirSync, openSync, writeFileSync, writeSync } from 'node:fs'
import path from 'node:path'

import { type ChangeEvent, eventJson, formatEventId } from '../../src/domain/event.js'
import { toRecord, type User } from '../../src/domain/user.js'
import { makeUser } from './store-users.js'

const USERS = 2000
/** Events per segment file (the store starts a new one past 16 MiB; these are about 8 MiB). */
const PER_SEGMENT = 20_000

/**
 * Writes a data directory whose log holds `events` events past its checkpoint, in the log's own
 * format, and no user file: USERS creates, then updates round the users. Returns each user as its
 * last event left it.
 */
export function writeLongTail(
  dataDir: string,
  checkpoint: 'none' | 'zero' | 'torn',
  events: number,
): Map<string, User> {
  const last = writeLog(dataDir, checkpoint, events)
  // A directory of an earlier release: every change made its own file durable.
  if (checkpoint === 'none')
    for (const user of last.values())
      writeFileSync(path.join(dataDir, 'users', `${user.id}.json`), toRecord(user).json)
  return last
}

function writeLog(
  dataDir: string,
  checkpoint: 'none' | 'zero' | 'torn',
  events: number,
): Map<string, User> {
  for (const dir of ['users', 'tombstones', 'events'])
    mkdirSync(path.join(dataDir, dir), { recursive: true })
  if (checkpoint === 'zero')
    writeFileSync(path.join(dataDir, 'checkpoint.json'), `{"through":"${formatEventId(0)}"}\n`)
  if (checkpoint === 'torn') writeFileSync(path.join(dataDir, 'checkpoint.json'), '{"thro')
  const users = Array.from({ length: USERS }, () =>
    makeUser({ metadata: { pad: 'x'.repeat(200) } }),
  )
  const last = new Map<string, User>()
  let fd: number | undefined
  let lines: string[] = []
  const flush = (): void => {
    if (fd !== undefined && lines.length > 0) writeSync(fd, lines.join(''))
    lines = []
  }
  for (let id = 1; id <= events; id += 1) {
    if ((id - 1) % PER_SEGMENT === 0) {
      flush()
      if (fd !== undefined) closeSync(fd)
      fd = openSync(path.join(dataDir, 'events', `${formatEventId(id)}.ndjson`), 'w')
    }
    const base = users[(id - 1) % USERS]
    if (base === undefined) throw new Error('no user')
    const before = last.get(base.id)
    const version = (before?.version ?? 0) + 1
    const user: User = { ...base, name: `Version ${version}`, version }
    last.set(user.id, user)
    const event: ChangeEvent = {
      id: formatEventId(id),
      type: before === undefined ? 'user.created' : 'user.updated',
      time: user.updatedAt,
      userId: user.id,
      version,
      actor: 'tester',
      ...(before === undefined ? {} : { changed: ['name'] }),
      userJson: toRecord(user).json,
    }
    lines.push(`${eventJson(event)}\n`)
    if (lines.length === 1000) flush()
  }
  flush()
  if (fd !== undefined) closeSync(fd)
  return last
}
