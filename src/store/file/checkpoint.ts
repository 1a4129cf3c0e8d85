import type { DurableDirectory } from './atomic-write.js'
import { CHECKPOINT_FILE, checkpointJson, syncFiles } from './checkpoint-file.js'
import { type Owed, OwedFiles } from './owed-files.js'

export interface CheckpointOptions {
  readonly users: DurableDirectory
  readonly graves: DurableDirectory
  /** DATA_DIR/keys: the journals of kept `Idempotency-Key`s. */
  readonly keys: DurableDirectory
  /** The data directory, where the checkpoint file is. */
  readonly root: DurableDirectory
  /** The highest event id durable in the log. */
  readonly logged: () => number
  /** The id the checkpoint file holds now. */
  readonly through: number
  /**
   * The ids this start skipped (idFloor): every one after `last` (the newest in the log at open)
   * and before `first` (the first handed out since). No event has them, and the checkpoint file
   * never names one: it stays at `last` until the event `first` is covered.
   */
  readonly skipped?: { readonly last: number; readonly first: number } | undefined
  /** How often a checkpoint runs; sooner once CHECKPOINT_FILES files wait. */
  readonly intervalMs: number
  /** No checkpoint runs while this says so (a store turned read-only). */
  readonly paused: () => boolean
  /** What a failed checkpoint means for the store (it decides between a warning and read-only). */
  readonly failed: (error: unknown) => void
  /** A checkpoint ran to its end (after failed ones, the store says so). */
  readonly succeeded?: () => void
}

/** Files renamed since the last checkpoint that start the next one at once. */
const CHECKPOINT_FILES = 4096

/** A directory whose files a checkpoint fsyncs. */
export type CheckpointDir = 'users' | 'tombstones' | 'keys'

/**
 * The file store's checkpoint (docs/operations.md, what a 503 on a write means): a change is
 * acknowledged once its event is durable in the log and its user file renamed into place,
 * unsynced (a key kept with it is appended to its journal after, unsynced too). A checkpoint
 * later fsyncs the files written since the last one, then their directories, then records in
 * `DATA_DIR/checkpoint.json` the id up to which nothing needs replaying. It never claims an event
 * whose file step is still running (such a step's file may be renamed after the fsyncs), nor one
 * whose key's journal line is not written yet.
 */
export class Checkpoint {
  readonly #options: CheckpointOptions
  #through: number
  /** The event whose file step runs, per user (one write at a time per user). */
  readonly #pending = new Map<string, number>()
  /** The oldest committed event whose file could not be written, per user: only a replay can. */
  readonly #held = new Map<string, number>()
  /** Committed events whose key's journal line is not written yet (or could not be). */
  readonly #heldEvents = new Set<number>()
  /** Imported users' files, written by the next checkpoint (their events are durable). */
  readonly #owed = new OwedFiles()
  #userFiles = new Set<string>()
  #graveFiles = new Set<string>()
  #keyFiles = new Set<string>()
  #usersChanged = false
  #gravesChanged = false
  #keysChanged = false
  #running: Promise<void> | undefined
  #timer: NodeJS.Timeout | undefined
  /** A checkpoint started by the timer or by the count of files, not yet over. */
  #started: Promise<void> | undefined

  constructor(options: CheckpointOptions) {
    this.#options = options
    this.#through = options.through
  }

  /** Runs checkpoints every `intervalMs` from now on (the timer never keeps the process alive). */
  start(): void {
    this.#timer ??= setInterval(() => {
      this.#startOne()
    }, this.#options.intervalMs)
    this.#timer.unref()
  }

  /** Ends what a checkpoint keeps running between checkpoints (the owed files' writer thread). */
  close(): Promise<void> {
    return this.#owed.close()
  }

  /** No more checkpoints on the timer; `settle` still runs one. */
  stop(): void {
    clearInterval(this.#timer)
    this.#timer = undefined
  }

  /**
   * Runs a checkpoint now (after the one running), unless paused; a failure goes to `failed` and
   * this resolves all the same.
   */
  async settle(): Promise<void> {
    if (this.#options.paused()) return
    try {
      await this.run()
    } catch (error) {
      this.#options.failed(error)
      return
    }
    this.#options.succeeded?.()
  }

  /** The id the checkpoint file holds. */
  get through(): number {
    return this.#through
  }

  /** Files renamed or removed since the last checkpoint. */
  get dirty(): number {
    // Owed files are not counted: they start no early checkpoint and hold no keyed write back.
    return this.#userFiles.size + this.#graveFiles.size + this.#keyFiles.size
  }

  /** Nothing waits for a checkpoint: no file step running or held, nothing renamed unsynced. */
  get idle(): boolean {
    const changed = this.#usersChanged || this.#gravesChanged || this.#keysChanged
    return this.#pending.size + this.#held.size + this.#heldEvents.size === 0 && !changed
  }

  /** A change's event is about to be appended; its file step follows, then `end`. */
  begin(userId: string, eventId: number): void {
    this.#pending.set(userId, eventId)
  }

  /** A file of users/ (tombstones/, keys/) was renamed into place, or only removed (no `name`). */
  touched(dir: CheckpointDir, name?: string): void {
    if (dir === 'users') {
      this.#usersChanged = true
      if (name !== undefined) this.#userFiles.add(name)
    } else if (dir === 'keys') {
      this.#keysChanged = true
      if (name !== undefined) this.#keyFiles.add(name)
    } else {
      this.#gravesChanged = true
      if (name !== undefined) this.#graveFiles.add(name)
    }
    if (this.dirty >= CHECKPOINT_FILES) this.#startOne()
  }

  #startOne(): void {
    if (this.#started !== undefined) return
    this.#started = this.settle().finally(() => {
      this.#started = undefined
    })
  }

  /**
   * The user's running change (a create) is committed, and its file is left to the next
   * checkpoint, which writes it before it moves past the event. Call it before `end`.
   */
  owe(userId: string, name: string, json: string): void {
    const eventId = this.#pending.get(userId)
    if (eventId === undefined) throw new Error(`no change of user ${userId} is running`)
    // No early checkpoint for these: the timer's comes soon enough, and past OWED_BACKLOG
    // (file-durability.ts) an import writes its files itself.
    this.#owed.add(name, { userId, json, eventId })
  }

  /** Files owed, waiting for a checkpoint or being written by one. */
  get owed(): number {
    return this.#owed.size
  }

  /** The checkpoint writing this owed file, while it runs: a later change of its user waits. */
  owedWriting(name: string): Promise<void> | undefined {
    return this.#owed.writing(name)
  }

  /**
   * Takes the owed file for its user's next change to write first; until `end`, no checkpoint
   * passes the owed event. `reowe` gives it back when that write failed.
   */
  takeOwed(name: string): Owed | undefined {
    const owed = this.#owed.take(name)
    if (owed !== undefined) this.#pending.set(owed.userId, owed.eventId)
    return owed
  }

  reowe(name: string, owed: Owed): void {
    this.#owed.add(name, owed)
  }

  /** The file step of the user's change is over, done or failed. */
  end(userId: string): void {
    this.#pending.delete(userId)
  }

  /**
   * The user's running change is committed but its file step failed: no checkpoint passes its
   * event until a later change of the user writes the file (`rewritten`), so that a restart
   * replays it.
   */
  hold(userId: string): void {
    const id = this.#pending.get(userId)
    if (id !== undefined && !this.#held.has(userId)) this.#held.set(userId, id)
  }

  /** The user's file now shows a change newer than any held one. */
  rewritten(userId: string): void {
    this.#held.delete(userId)
  }

  /** No checkpoint passes this committed event until `releaseEvent`: its key's journal line is unwritten. */
  holdEvent(eventId: number): void {
    this.#heldEvents.add(eventId)
  }

  /** The held event's key line is written (and `touched`). */
  releaseEvent(eventId: number): void {
    this.#heldEvents.delete(eventId)
  }

  /**
   * Runs a checkpoint, after the one running if any (so that a caller's changes are covered).
   * Rejects with a WriteError when an fsync fails: nothing the kernel holds is trusted then.
   */
  run(): Promise<void> {
    const previous = this.#running ?? Promise.resolve()
    const next = previous.catch(() => undefined).then(() => this.#checkpoint())
    this.#running = next
    void next
      .catch(() => undefined)
      .then(() => {
        if (this.#running === next) this.#running = undefined
      })
    return next
  }

  async #checkpoint(): Promise<void> {
    let through = this.#options.logged()
    for (const id of this.#pending.values()) through = Math.min(through, id - 1)
    for (const id of this.#held.values()) through = Math.min(through, id - 1)
    for (const id of this.#heldEvents) through = Math.min(through, id - 1)
    const { skipped } = this.#options
    if (skipped !== undefined && through > skipped.last && through < skipped.first)
      through = skipped.last
    through = Math.max(through, this.#through)
    const changed =
      this.#usersChanged || this.#gravesChanged || this.#keysChanged || this.#owed.size > 0
    if (through === this.#through && !changed) return
    const users = this.#userFiles
    const graves = this.#graveFiles
    const keys = this.#keyFiles
    const dirs = [
      ...(this.#usersChanged || this.#owed.size > 0 ? [this.#options.users] : []),
      ...(this.#gravesChanged ? [this.#options.graves] : []),
      ...(this.#keysChanged ? [this.#options.keys] : []),
    ]
    const usersChanged = this.#usersChanged
    const gravesChanged = this.#gravesChanged
    const keysChanged = this.#keysChanged
    this.#userFiles = new Set()
    this.#graveFiles = new Set()
    this.#keyFiles = new Set()
    this.#usersChanged = false
    this.#gravesChanged = false
    this.#keysChanged = false
    let written = 0
    try {
      // First, without a turn of the event loop since `through` was taken: every owed file of an
      // event up to it is in this batch (a change not yet owed is still pending).
      written = await this.#owed.writeAll(this.#options.users)
      await syncFiles(this.#options.users, users)
      await syncFiles(this.#options.graves, graves)
      await syncFiles(this.#options.keys, keys)
      await Promise.all(dirs.map((dir) => dir.sync()))
      if (through === this.#through) return
      await this.#options.root.writeFile(CHECKPOINT_FILE, checkpointJson(through))
    } catch (error) {
      // The next checkpoint does it all again (after a full disk, say; a failed fsync ends them).
      for (const name of users) this.#userFiles.add(name)
      // Owed files written are fsynced already; their directory is not.
      this.#usersChanged ||= written > 0
      for (const name of graves) this.#graveFiles.add(name)
      for (const name of keys) this.#keyFiles.add(name)
      this.#usersChanged ||= usersChanged
      this.#gravesChanged ||= gravesChanged
      this.#keysChanged ||= keysChanged
      throw error
    }
    this.#through = through
  }
}
