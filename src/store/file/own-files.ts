import { constants, lstatSync, readdirSync, type Stats, statSync } from 'node:fs'
import path from 'node:path'

import { StartError } from '../../domain/errors.js'

/*
 * The files the store appends to, cuts or overwrites in place (event-log segments, kept keys'
 * journals, webhook delivery logs) are opened by name. A symbolic link left at such a name, by a
 * careless restore or by someone who may write in DATA_DIR, would have the service (often root)
 * append to, truncate or overwrite a file outside the data directory. These flags make open(2)
 * refuse a link at the name (ELOOP) instead: a refused write, never one outside.
 */
const { O_APPEND, O_CREAT, O_NOFOLLOW, O_RDWR, O_TRUNC, O_WRONLY } = constants
/** `'a'`, refusing a symbolic link. */
export const APPEND_OWN = O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW
/** `'a+'`, refusing a symbolic link. */
export const READ_APPEND_OWN = O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW
/** `'r+'`, refusing a symbolic link. */
export const UPDATE_OWN = O_RDWR | O_NOFOLLOW
/** `'w'`, refusing a symbolic link. */
export const REPLACE_OWN = O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW

/** A file the store writes in place is a symbolic link. */
export class NotOwnFileError extends StartError {
  override name = 'NotOwnFileError'
}

/**
 * Refuses the start, naming it, when an entry of `dir` whose name `isOwn` says is the store's is a
 * symbolic link: the start would read what it leads to and could cut its end (a torn last line),
 * a file outside DATA_DIR. One lstat(2) an entry. (A directory cannot be written through: the
 * store's own steps refuse it as they meet it; a FIFO is refused as checkNotSpecial says.)
 */
export function checkOwnFiles(dir: string, isOwn: (name: string) => boolean): void {
  for (const name of readdirSync(dir)) {
    if (!isOwn(name)) continue
    const file = path.join(dir, name)
    const stats = lstatSync(file)
    if (stats.isSymbolicLink())
      throw new NotOwnFileError(
        `${file} is a symbolic link: the service appends to this file and rewrites it in place, so it must be a file of the data directory itself (put the file there instead)`,
      )
    if (isSpecial(stats)) throw notPlainFile(file)
  }
}

/**
 * Refuses the start, naming it, when a file it reads whole is a FIFO, a socket or a device: the
 * read of a FIFO without a writer waits for ever, and a synchronous one holds the whole process
 * (deaf to stop signals, without a log line). A missing file or a directory is left to the read,
 * which says so.
 */
export function checkNotSpecial(file: string): void {
  let stats: Stats
  try {
    stats = statSync(file)
  } catch {
    return
  }
  if (isSpecial(stats)) throw notPlainFile(file)
}

function isSpecial(stats: Stats): boolean {
  return !stats.isFile() && !stats.isDirectory() && !stats.isSymbolicLink()
}

function notPlainFile(file: string): NotOwnFileError {
  return new NotOwnFileError(
    `${file} is not a plain file (a FIFO, socket or device): the service reads it whole at start; put the file there instead`,
  )
}
