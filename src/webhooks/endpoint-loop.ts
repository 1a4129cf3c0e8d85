/**
 * Delivery to one endpoint (docs/webhooks.md, delivery): while this process holds its lease, the
 * next event after its cursor is attempted, one attempt at a time; the cursor moves past it only
 * after a 2xx; a failure waits for the retry schedule, and the last one, or a 410, disables the
 * endpoint; a cursor behind the retained feed disables it too.
 */
import type { Agent } from 'node:http'

import { ServiceError } from '../domain/errors.js'
import { type ChangeEvent, compareCursors } from '../domain/event.js'
import type { DisabledReason, StoredWebhook } from '../domain/webhook.js'
import { type AttemptOutcome, createEndpointAgent, sendAttempt } from './attempt.js'
import { EndpointLease } from './endpoint-lease.js'
import {
  attemptEntry,
  disableEndpoint,
  enabledBetween,
  freshRetry,
  type LoggedAttempt,
  type RetryState,
} from './endpoint-state.js'
import type { LoopContext } from './loop-context.js'
import { LoopPause } from './loop-pause.js'
import { LoopTrouble } from './loop-trouble.js'
import { type AheadPage, ReadAhead } from './read-ahead.js'
import { retryDelayMs } from './retry-schedule.js'
import { webhookBody, webhookHeaders } from './webhook-message.js'

/** Until something wakes the loop: a new event, a change of the endpoint, or the poll. */
const UNTIL_WOKEN = -1

export class EndpointLoop {
  readonly id: string
  readonly #context: LoopContext
  #hook: StoredWebhook | undefined
  #stale: boolean
  #stopped = false
  #running: Promise<void> | undefined
  #retry: RetryState | undefined
  /** A disabling the store refused (a full disk, read-only): the next steps try it, no attempt. */
  #disabling: DisabledReason | undefined
  /** The last entry this loop logged while it held the lease: no need to read the log again. */
  #lastLogged: LoggedAttempt | undefined
  readonly #lease: EndpointLease
  #inFlight: AbortController | undefined
  #agent: { readonly url: string; readonly agent: Agent } | undefined
  /** Counts fresh schedules, so that an attempt begun before one does not set the one after it. */
  #generation = 0
  readonly #pause: LoopPause
  readonly #ahead = new ReadAhead(() => this.#context.now())
  readonly #trouble: LoopTrouble

  /** `hook`: the endpoint as just listed; none: it is read from the store first. */
  constructor(id: string, context: LoopContext, hook?: StoredWebhook) {
    this.id = id
    this.#context = context
    this.#hook = hook
    this.#stale = hook === undefined
    this.#pause = new LoopPause(context.pollMs * 5)
    this.#trouble = new LoopTrouble(context.logger, id)
    this.#lease = new EndpointLease({
      webhooks: context.store.webhooks,
      id,
      holder: context.holder,
      leaseMs: context.leaseMs,
      renewMs: context.renewMs,
      onLost: () => this.#inFlight?.abort(),
    })
  }

  /** The endpoint as the loop last read it (for the endpoint metrics). */
  get hook(): StoredWebhook | undefined {
    return this.#hook
  }

  start(): void {
    this.#running ??= this.#run()
  }

  /** The endpoint changed (or may have): read it again. A client's cursor move starts afresh. */
  changed(cursorMoved = false): void {
    if (cursorMoved) this.#freshSchedule()
    this.#stale = true
    this.#pause.wake()
  }

  /** Another process changed it, as a listing shows: the same as changed() if its version moved. */
  listed(hook: StoredWebhook): void {
    if (hook.endpoint.version !== this.#hook?.endpoint.version) this.changed()
  }

  /** New events may be readable. */
  newEvents(): void {
    this.#pause.newEvents()
  }

  /** Stops at once: an attempt in flight is abandoned (not logged), and no other starts. */
  async stop(): Promise<void> {
    this.#stopped = true
    this.#inFlight?.abort()
    this.#pause.wake()
    await this.#running
    this.#agent?.agent.destroy()
    await this.#lease.release()
  }

  async #run(): Promise<void> {
    while (!this.#stopped) {
      let wait: number
      try {
        wait = await this.#step()
        this.#trouble.worked()
      } catch (error) {
        if (this.#stopped) break
        this.#trouble.failed(error)
        wait = this.#context.pollMs
      }
      if (wait !== 0 && !this.#stopped)
        await this.#pause.wait(wait === UNTIL_WOKEN ? undefined : wait)
    }
  }

  /** One step: the ms to wait before the next (0: none, UNTIL_WOKEN). */
  async #step(): Promise<number> {
    const { store, paused, pollMs } = this.#context
    if (paused()) return pollMs
    this.#pause.reading()
    if (this.#stale) {
      this.#stale = false
      this.#observe(await store.webhooks.get(this.id))
    }
    const hook = this.#hook
    if (hook === undefined) {
      this.#stopped = true
      return 0
    }
    if (!hook.endpoint.enabled) return UNTIL_WOKEN
    const held = this.#lease.held
    if (!(await this.#lease.hold())) return pollMs
    // Taken (again): another process may have logged attempts meanwhile.
    if (!held) this.#lastLogged = undefined
    if (this.#disabling !== undefined) return this.#disable(this.#disabling)
    const cursor = await store.webhooks.cursor(this.id)
    if (cursor === undefined) return UNTIL_WOKEN
    const event = await this.#nextEvent(hook, cursor)
    if (event === undefined) return UNTIL_WOKEN
    if (this.#retry?.eventId !== event.id) {
      const { retrySchedule, now } = this.#context
      const last = this.#lastLogged
      this.#retry = await freshRetry(store.webhooks, hook, event.id, retrySchedule, last, now())
    }
    const due = this.#retry.dueAt - performance.now()
    if (due > 0) return due
    return this.#deliver(hook, event, cursor, this.#retry)
  }

  /**
   * The first event after the cursor that the endpoint takes; undefined when there is none yet.
   * The cursor moves past the events its types leave out, so that they are not read again.
   */
  async #nextEvent(hook: StoredWebhook, cursor: string): Promise<ChangeEvent | undefined> {
    const { store } = this.#context
    let page: AheadPage
    try {
      page = await this.#ahead.next(store.events, cursor, hook.endpoint.eventTypes ?? undefined)
    } catch (error) {
      if (!(error instanceof ServiceError && error.code === 'cursor_expired')) throw error
      await this.#disable('cursor_expired')
      return undefined
    }
    const { event } = page
    // A change of the types meanwhile must not pass over what the new ones take.
    if (event === undefined && !this.#stale && compareCursors(page.nextCursor, cursor) > 0) {
      await store.webhooks.advanceCursor(this.id, cursor, page.nextCursor)
    }
    return event
  }

  async #deliver(
    hook: StoredWebhook,
    event: ChangeEvent,
    cursor: string,
    retry: RetryState,
  ): Promise<number> {
    const { store, now, logger } = this.#context
    // Changed on another replica since this step read it: no attempt goes with the old state.
    const current = await store.webhooks.get(this.id)
    if (current?.endpoint.version !== hook.endpoint.version) {
      this.#observe(current)
      return 0
    }
    // Stopped, or the lease lost, while this step waited on the store: nothing was in flight to
    // abort, so no attempt may start now (a DELETE's 204 may be out, another process deliver).
    if (this.#stopped || !this.#lease.held) return 0
    const attempt = retry.attempts + 1
    const generation = this.#generation
    const time = new Date(now()).toISOString()
    const outcome = await this.#attempt(hook, event)
    // Abandoned (closing, deleted, or the lease lost): not logged, made again by whoever goes on.
    if (this.#stopped || !this.#lease.held) return 0
    await store.webhooks.logAttempt(
      this.id,
      attemptEntry(this.#context.newId(), event, attempt, time, outcome),
    )
    this.#lastLogged = { eventId: event.id, attempt }
    this.#context.counted(outcome.result)
    if (outcome.result === 'succeeded') {
      this.#retry = undefined
      if (await store.webhooks.advanceCursor(this.id, cursor, event.id))
        this.#ahead.passed(event.id)
      return 0
    }
    logger.warn('webhook attempt failed', {
      endpointId: this.id,
      eventId: event.id,
      attempt,
      error: outcome.error,
      responseStatus: outcome.responseStatus,
      ...(outcome.tlsReason === undefined ? {} : { tlsReason: outcome.tlsReason }),
    })
    if (outcome.responseStatus === 410) {
      // Gone is the URL attempted: one a client replaced meanwhile is retried at the new URL.
      const current = await store.webhooks.get(this.id)
      if (current?.endpoint.url === hook.endpoint.url) return this.#disable('gone')
    }
    const { retrySchedule, random } = this.#context
    // An enabling or a cursor move meanwhile started a fresh schedule: this failure is not in it.
    if (generation !== this.#generation) return 0
    const failed = retry.failed + 1
    const delay = retryDelayMs(retrySchedule, failed, random, outcome.retryAfterSeconds)
    if (delay === undefined) return this.#disable('failing')
    this.#retry = { eventId: event.id, attempts: attempt, failed, dueAt: performance.now() + delay }
    return delay
  }

  /** The endpoint as just read from the store: an enabling since the last read starts afresh. */
  #observe(next: StoredWebhook | undefined): void {
    const before = this.#hook
    this.#hook = next
    if (before === undefined || next === undefined) return
    if (before.endpoint.version === next.endpoint.version) return
    // Its types may have changed: what was read ahead under the old ones is read again.
    this.#ahead.forget()
    if (enabledBetween(before.endpoint, next.endpoint)) this.#freshSchedule()
  }

  #freshSchedule(): void {
    this.#generation += 1
    this.#retry = undefined
    this.#disabling = undefined
  }

  async #attempt(hook: StoredWebhook, event: ChangeEvent): Promise<AttemptOutcome> {
    const body = webhookBody(event)
    const controller = new AbortController()
    this.#inFlight = controller
    try {
      return await sendAttempt(
        {
          url: hook.endpoint.url,
          headers: webhookHeaders(hook, event.id, body, this.#context.now()),
          body,
        },
        {
          allow: this.#context.allow,
          timeoutMs: this.#context.timeoutMs,
          agent: await this.#agentFor(hook.endpoint.url),
          signal: controller.signal,
        },
      )
    } finally {
      this.#inFlight = undefined
    }
  }

  async #disable(reason: DisabledReason): Promise<number> {
    const { store, now, logger } = this.#context
    this.#disabling = reason
    const hook = await disableEndpoint(store.webhooks, this.id, reason, now())
    this.#disabling = undefined
    this.#retry = undefined
    this.#stale ||= hook === undefined
    if (hook !== undefined) {
      this.#hook = hook
      logger.warn('webhook endpoint disabled', { endpointId: this.id, reason })
    }
    return 0
  }

  /** The kept-alive connections to the endpoint's URL (new ones when the URL changed). */
  async #agentFor(url: string): Promise<Agent> {
    if (this.#agent?.url !== url) {
      this.#agent?.agent.destroy()
      this.#agent = { url, agent: await createEndpointAgent(url) }
    }
    return this.#agent.agent
  }
}
