import { open } from 'node:fs/promises'
import { performance } from 'node:perf_hooks'
import { setImmediate as nextTurn } from 'node:timers/promises'

import { namingFile } from './errno.js'

const NEWLINE = 0x0a
/** Bytes read at once; a longer line grows the buffer to hold it. */
const CHUNK = 1024 * 1024
/** The longest stretch of lines handled without letting the event loop serve others. */
const TURN_MS = 10

/** What `readLines` found: the bytes of whole lines, and the file's size (more: a torn line). */
export interface SegmentEnd {
  readonly end: number
  readonly size: number
}

/**
 * Calls `line` with every whole line of a log segment (its newline left out) and its byte
 * offset, in order, reading a chunk at a time and yielding to the event loop every TURN_MS, so
 * that a long log is read in bounded memory while requests (health probes) are answered. `line` may
 * return a promise to hold the reading until it settles. The bytes it is given are reused after
 * it returns: copy what must be kept. A last line without its newline was never acknowledged: it
 * is not passed (the end says where it starts).
 */
export async function readLines(
  file: string,
  line: (bytes: Buffer, offset: number) => void | Promise<void>,
): Promise<SegmentEnd> {
  const handle = await open(file, 'r')
  try {
    let buffer = Buffer.allocUnsafe(CHUNK)
    let carried = 0
    let position = 0
    let turn = performance.now()
    for (;;) {
      if (carried === buffer.length) {
        const bigger = Buffer.allocUnsafe(buffer.length * 2)
        buffer.copy(bigger, 0, 0, carried)
        buffer = bigger
      }
      const free = buffer.length - carried
      // A read's error names no file (EISDIR: a directory at a segment's name): the log says which.
      const { bytesRead } = await handle
        .read(buffer, carried, free, position + carried)
        .catch((error: unknown) => {
          throw namingFile(error, file)
        })
      if (bytesRead === 0) break
      const view = buffer.subarray(0, carried + bytesRead)
      let start = 0
      for (let stop = view.indexOf(NEWLINE); stop !== -1; stop = view.indexOf(NEWLINE, start)) {
        const held = line(view.subarray(start, stop), position + start)
        if (held !== undefined) await held
        start = stop + 1
        if (performance.now() - turn > TURN_MS) {
          await nextTurn()
          turn = performance.now()
        }
      }
      view.copy(buffer, 0, start)
      carried = view.length - start
      position += start
    }
    return { end: position, size: position + carried }
  } finally {
    await handle.close()
  }
}
