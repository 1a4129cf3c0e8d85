import fs from 'node:fs'
import path from 'node:path'
import { promisify } from 'node:util'

import type { DeliveryAttempt } from '../../domain/webhook.js'
import type { Logger } from '../../log/logger.js'
import { KEPT_ATTEMPTS } from '../webhook-store.js'
import type { DurableDirectory } from './atomic-write.js'
import { APPEND_OWN } from './own-files.js'
import { toAttemptLine } from './stored-webhooks.js'
import { webhookFileNames } from './webhook-files-load.js'

// The callback form, promisified: a FileHandle per append costs the event loop more (an attempt's
// line goes out with each delivery).
const appendLines = promisify(fs.appendFile)
/** APPEND_OWN as appendFile's flag: node:fs passes it to open(2), its types list only strings. */
const APPEND_FLAG = APPEND_OWN as unknown as string

/** A log file is rewritten with its newest KEPT_ATTEMPTS once it holds this many more lines. */
const LOG_SLACK = KEPT_ATTEMPTS

/** The newest attempts of an endpoint, as its store keeps them in memory. */
export type KeptAttempts = () => readonly DeliveryAttempt[]

/** Runs a file step of an endpoint after its earlier ones (WebhookFiles' queue). */
export type EndpointStep = (
  id: string,
  task: (dir: DurableDirectory) => Promise<void>,
) => Promise<void>

/**
 * The endpoints' delivery logs, `DATA_DIR/webhooks/<id>.log`: a JSON line per attempt, appended
 * unsynced in the order the attempts were made, the lines of every attempt since the last `flush`
 * in one append (an append per attempt took three trips to the thread pool per delivery, where
 * they queue behind the user writes), and rewritten with the newest KEPT_ATTEMPTS once the file
 * holds twice as many. A failed append (a full disk) is logged once per outage; its lines, the
 * newest KEPT_ATTEMPTS of them, wait for the next `flush`, after a line break that ends what the
 * failed append wrote of a line, so that a restart shows the log the API showed. A crash may lose
 * the attempts' lines since the last flush, never show an attempt that was not made.
 */
export class DeliveryLogFiles {
  readonly #logger: Logger
  readonly #step: EndpointStep
  readonly #known: (id: string) => boolean
  /** The lines each log file holds. */
  readonly #lines = new Map<string, number>()
  /** Lines of each endpoint not written yet, and whether a write of them is under way. */
  readonly #unwritten = new Map<string, string[]>()
  readonly #writing = new Set<string>()
  /** Endpoints with lines for the next flush. */
  readonly #due = new Map<string, KeptAttempts>()
  /** Endpoints whose last write failed: their next append starts on a new line. */
  readonly #failed = new Set<string>()
  /** Endpoints whose log ended inside a line at open (a torn append): the same, no outage. */
  readonly #torn = new Set<string>()
  #outage = false

  constructor(logger: Logger, step: EndpointStep, known: (id: string) => boolean) {
    this.#logger = logger
    this.#step = step
    this.#known = known
  }

  /**
   * The lines an endpoint's log file held at open; `torn`: it ends inside a line, which the next
   * append must not extend (the attempt it starts with would be passed over at the next start).
   */
  loaded(id: string, lines: number, torn: boolean): void {
    this.#lines.set(id, lines)
    if (torn) this.#torn.add(id)
  }

  /** The endpoint is gone: nothing of its log is written any more. */
  forget(id: string): void {
    this.#lines.delete(id)
    this.#unwritten.delete(id)
    this.#due.delete(id)
    this.#failed.delete(id)
    this.#torn.delete(id)
  }

  /** Queues the attempt's line for the next flush. */
  append(id: string, attempt: DeliveryAttempt, kept: KeptAttempts): void {
    this.#queue(id, [`${toAttemptLine(attempt)}\n`], false)
    this.#due.set(id, kept)
  }

  /** Writes, in the background, the lines queued since the last flush and those that failed. */
  flush(): void {
    for (const [id, kept] of this.#due) this.#start(id, kept)
  }

  /** Lines not written go before those queued since; a log keeps its newest KEPT_ATTEMPTS only. */
  #queue(id: string, lines: readonly string[], first: boolean): void {
    const queued = this.#unwritten.get(id) ?? []
    const all = first ? [...lines, ...queued] : [...queued, ...lines]
    this.#unwritten.set(id, all.slice(-KEPT_ATTEMPTS))
  }

  #start(id: string, kept: KeptAttempts): void {
    // A write under way takes every line queued before it ends.
    if (this.#writing.has(id)) return
    this.#due.delete(id)
    this.#writing.add(id)
    this.#write(id, kept).then(
      () => {
        if (!this.#outage || this.#failed.size > 0) return
        this.#outage = false
        this.#logger.info('webhook delivery logs are written again')
      },
      (error: unknown) => {
        if (this.#outage) return
        this.#outage = true
        this.#logger.warn('could not append to a webhook delivery log; it is tried again', {
          webhookId: id,
          code: (error as { cause?: { code?: unknown } }).cause?.code,
        })
      },
    )
  }

  /** Appends the endpoint's unwritten lines until none are left, then trims the log if long. */
  #write(id: string, kept: KeptAttempts): Promise<void> {
    const names = webhookFileNames(id)
    return this.#step(id, async (dir) => {
      try {
        for (;;) {
          const lines = this.#unwritten.get(id) ?? []
          this.#unwritten.delete(id)
          if (lines.length === 0 || !this.#known(id)) return
          // A failed append may have written part of a line: the next line starts after it.
          const start = this.#failed.has(id) || this.#torn.has(id) ? '\n' : ''
          await this.#guard(id, kept, lines, () =>
            appendLines(path.join(dir.path, names.log), start + lines.join(''), {
              mode: 0o600,
              flag: APPEND_FLAG,
            }),
          )
          this.#failed.delete(id)
          this.#torn.delete(id)
          const count = (this.#lines.get(id) ?? 0) + lines.length
          this.#lines.set(id, count)
          if (count <= KEPT_ATTEMPTS + LOG_SLACK) continue
          // The log in memory holds every line not written yet too: the rewrite covers them.
          const newest = kept()
          const covered = this.#unwritten.get(id) ?? []
          this.#unwritten.delete(id)
          const text = newest.map((entry) => `${toAttemptLine(entry)}\n`).join('')
          await this.#guard(id, kept, covered, () =>
            dir.writeFile(names.log, text, undefined, false),
          )
          this.#lines.set(id, newest.length)
        }
      } finally {
        this.#writing.delete(id)
      }
    })
  }

  /** Runs a write; when it fails, its lines wait for the retry, first in line. */
  async #guard(
    id: string,
    kept: KeptAttempts,
    lines: readonly string[],
    write: () => Promise<void>,
  ) {
    try {
      await write()
    } catch (error) {
      this.#queue(id, lines, true)
      this.#failed.add(id)
      this.#due.set(id, kept)
      throw error
    }
  }
}
