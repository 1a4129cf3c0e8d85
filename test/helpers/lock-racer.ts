/*
 * A process that races for a data directory's lock, for test/store/file/data-dir-lock.test.ts.
 *
 * With an IPC channel it serves many rounds: `{ kind: 'go', dir, at }` makes it wait for the
 * moment `at` (so that all racers start together), try the lock and answer `held` or `refused`;
 * `{ kind: 'release' }` gives a held lock up and answers `released`.
 *
 * Without one it runs a single round on the directory named by its argument, as a fresh process:
 * it prints `held <file>` or `refused: <message>`, then keeps a held lock until stdin ends.
 */
import { DataDirLock } from '../../src/store/file/data-dir-lock.js'

export type RacerCommand =
  | { readonly kind: 'go'; readonly dir: string; readonly at: number }
  | { readonly kind: 'release' }

export type RacerAnswer =
  | { readonly kind: 'ready'; readonly pid: number }
  | { readonly kind: 'held'; readonly pid: number; readonly file: string }
  | {
      readonly kind: 'refused'
      readonly pid: number
      readonly name: string
      readonly message: string
    }
  | { readonly kind: 'released'; readonly pid: number; readonly removed: boolean }

/** The lock when taken, or the error that refused it. */
function tryLock(dir: string): DataDirLock | Error {
  const lock = new DataDirLock(dir)
  try {
    lock.acquire()
    return lock
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error))
  }
}

function isCommand(message: unknown): message is RacerCommand {
  return typeof message === 'object' && message !== null && 'kind' in message
}

function serveRounds(send: (answer: RacerAnswer) => void): void {
  let lock: DataDirLock | undefined
  process.on('message', (command: unknown) => {
    if (!isCommand(command)) throw new Error(`not a racer command: ${JSON.stringify(command)}`)
    if (command.kind === 'release') {
      send({ kind: 'released', pid: process.pid, removed: lock?.release() ?? false })
      lock = undefined
      return
    }
    // A busy wait, not a timer: timers fire late by a varying amount, which would spread the start.
    while (Date.now() < command.at) {
      /* wait for the common start */
    }
    const result = tryLock(command.dir)
    if (result instanceof Error) {
      const { name, message } = result
      send({ kind: 'refused', pid: process.pid, name, message })
    } else {
      lock = result
      send({ kind: 'held', pid: process.pid, file: result.file })
    }
  })
  send({ kind: 'ready', pid: process.pid })
}

function runOnce(dir: string): void {
  const result = tryLock(dir)
  if (result instanceof Error) {
    process.stdout.write(`refused: ${result.message}\n`)
    return
  }
  process.stdout.write(`held ${result.file}\n`)
  process.stdin.resume().on('end', () => {
    result.release()
  })
}

const send = process.send?.bind(process)
if (send !== undefined) {
  serveRounds((answer) => {
    send(answer)
  })
} else {
  const dir = process.argv[2]
  if (dir === undefined)
    throw new Error('usage: lock-racer.ts DATA_DIR (or run it with an IPC channel)')
  runOnce(dir)
}
