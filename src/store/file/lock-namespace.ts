import { randomBytes } from 'node:crypto'
import { futimesSync, readdirSync, readlinkSync, rmSync, statSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { performance } from 'node:perf_hooks'

/*
 * Two containers sharing one volume each run in a PID namespace of their own: there, the other's
 * pid means nothing (it is dead, or another program, or our own: pid 1 in both), and /proc cannot
 * show the other's open files. So a lock file's owner writes its PID namespace into its token. A
 * process that finds a lock of another namespace cannot judge it by pid: it puts a watch file of
 * its own (WATCH_PREFIX and a random name) beside it and watches the lock file for BEAT_WAIT_MS,
 * and a file touched meanwhile has a live owner. An owner lists the directory every BEAT_MS and
 * touches its lock file while any watch is there: no write at all unless someone asks (an idle
 * service keeps its disk idle). Each watcher removes only its own file, so one that ends never
 * silences the owner for another still watching; and the owner judges a watch's age by its own
 * clock, never by the time stamp a file server or another host put on it.
 */

/** The start of a token that names its owner's PID namespace (8 hex digits after it). */
export const NAMESPACE_MARK = 'fdfdfdfe'
/** How often an owner looks for watch files. */
export const BEAT_MS = 1000
/**
 * The start of the name of a file in DATA_DIR while a process watches a lock of another namespace:
 * the owner's cue to touch it. One file a watcher.
 */
export const WATCH_PREFIX = '.lock-watch.'
/** How long a lock of another namespace is watched: three beats, one of them late. */
export const BEAT_WAIT_MS = 3000
/** How long, by its owner's clock, a watch is answered: past it, its watcher was killed. */
const WATCH_LIFE_MS = 4 * BEAT_WAIT_MS

const NAMESPACE_LINK = /^pid:\[([0-9]{1,10})\]$/
let own: number | undefined

/**
 * This process's PID namespace: the inode number /proc/self/ns/pid names (below 2^32), or 0 where
 * it cannot be read (no /proc): unknown, and then every lock is judged as one of our own namespace.
 */
export function ownPidNamespace(): number {
  if (own === undefined) {
    let link = ''
    try {
      link = readlinkSync('/proc/self/ns/pid')
    } catch {
      // No /proc: unknown.
    }
    const found = Number(NAMESPACE_LINK.exec(link)?.[1] ?? 0)
    own = found <= 0xffffffff ? found : 0
  }
  return own
}

/** The 16 hex digits a new token starts with: NAMESPACE_MARK and our namespace. */
export function namespacePrefix(): string {
  return NAMESPACE_MARK + ownPidNamespace().toString(16).padStart(8, '0')
}

/**
 * Whether a lock's token says its owner runs in another PID namespace than ours. A token without
 * one (from an earlier release), or with an unknown one on either side, is taken as ours.
 */
export function isOtherNamespace(token: string): boolean {
  if (!token.startsWith(NAMESPACE_MARK)) return false
  const theirs = Number.parseInt(token.slice(NAMESPACE_MARK.length, NAMESPACE_MARK.length + 8), 16)
  const ours = ownPidNamespace()
  return theirs !== 0 && ours !== 0 && theirs !== ours
}

/**
 * Whether a lock file is touched within BEAT_WAIT_MS of our asking (a watch file): its owner is
 * alive. Blocks for that long (a start, before the server listens); a file gone meanwhile has no
 * owner left to wait for.
 */
export function isBeating(file: string, waitMs = BEAT_WAIT_MS): boolean {
  const before = modified(file)
  if (before === undefined) return false
  const watch = path.join(path.dirname(file), WATCH_PREFIX + randomBytes(8).toString('hex'))
  // A new file (never through a link, never another watcher's).
  writeFileSync(watch, '', { flag: 'wx' })
  try {
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, waitMs)
  } finally {
    rmSync(watch, { force: true })
  }
  const after = modified(file)
  return after !== undefined && after !== before
}

function modified(file: string): bigint | undefined {
  try {
    return statSync(file, { bigint: true }).mtimeNs
  } catch {
    return undefined
  }
}

/**
 * Touches a held lock file through its descriptor (open for reading only: the owner of a file may
 * set its times) while someone watches it. `seen` holds the watches found so far, each with the
 * time (`now`, monotonic) it was first found. A failure (a file system remounted read-only) is no
 * failure of the lock: the store's own check tells whether the lock is still ours.
 */
export function beat(
  dir: string,
  fd: number,
  seen: Map<string, number>,
  now = performance.now(),
): void {
  try {
    const names = new Set(readdirSync(dir).filter((name) => name.startsWith(WATCH_PREFIX)))
    for (const name of seen.keys()) if (!names.has(name)) seen.delete(name)
    let asked = false
    for (const name of names) {
      const found = seen.get(name) ?? now
      seen.set(name, found)
      // A watcher killed while it watched leaves its file behind: removed, not answered for ever
      // (what cannot be removed stays known, and unanswered).
      if (now - found <= WATCH_LIFE_MS) asked = true
      else if (removed(path.join(dir, name))) seen.delete(name)
    }
    if (asked) futimesSync(fd, Date.now() / 1000, Date.now() / 1000)
  } catch {
    // See above: nothing to do here.
  }
}

function removed(file: string): boolean {
  try {
    rmSync(file, { force: true })
    return true
  } catch {
    return false
  }
}
