/**
 * The lease of delivering to one endpoint (one process at a time, across replicas): taken before
 * an attempt, renewed in the background while held, and given back when delivery stops.
 */
import { performance } from 'node:perf_hooks'

import type { WebhookStore } from '../store/webhook-store.js'

export interface EndpointLeaseOptions {
  readonly webhooks: Pick<WebhookStore, 'lease' | 'releaseLease'>
  readonly id: string
  readonly holder: string
  readonly leaseMs: number
  readonly renewMs: number
  /**
   * The lease is lost (another process holds it, or it may have run out unrenewed): what is in
   * flight must be abandoned.
   */
  readonly onLost: () => void
}

export class EndpointLease {
  readonly #options: EndpointLeaseOptions
  #held = false
  #renewal: NodeJS.Timeout | undefined
  /** A renewal asked of the store and not yet answered. */
  #renewing: Promise<void> | undefined
  /** When the lease, as last granted, is given up unless renewed meanwhile. */
  #expiry: NodeJS.Timeout | undefined

  constructor(options: EndpointLeaseOptions) {
    this.#options = options
  }

  get held(): boolean {
    return this.#held
  }

  /** Takes the lease, or says it is held already; false while another process holds it. */
  async hold(): Promise<boolean> {
    if (this.#held) return true
    const { webhooks, id, holder, leaseMs, renewMs } = this.#options
    const asked = performance.now()
    this.#held = await webhooks.lease(id, holder, leaseMs)
    if (!this.#held) return false
    this.#confirmed(asked)
    // Two holds asked at once are both granted; the second must not start a second timer.
    if (this.#renewal === undefined) {
      this.#renewal = setInterval(() => {
        this.#renewing ??= this.#renew().finally(() => {
          this.#renewing = undefined
        })
      }, renewMs)
      this.#renewal.unref()
    }
    return true
  }

  /**
   * Stops renewing and gives the lease back (best effort: it runs out anyway), after a renewal in
   * flight: granted after the release, it would keep the others out for a whole lease.
   */
  async release(): Promise<void> {
    this.#stopRenewing()
    await this.#renewing
    if (!this.#held) return
    this.#held = false
    const { webhooks, id, holder } = this.#options
    await webhooks.releaseLease(id, holder).catch(() => undefined)
  }

  async #renew(): Promise<void> {
    const { webhooks, id, holder, leaseMs } = this.#options
    const asked = performance.now()
    // A store fault is not a loss: the lease runs on until it is renewed or runs out.
    const held = await webhooks.lease(id, holder, leaseMs).catch(() => undefined)
    // Lost meanwhile, or being released (renewals stopped): nothing more to confirm.
    if (!this.#held || held === undefined || this.#renewal === undefined) return
    if (held) this.#confirmed(asked)
    else this.#lose()
  }

  /**
   * The store granted the lease to a request sent at `asked` (performance.now()), so it runs at
   * least until `asked` + leaseMs. Unless renewed again, it is given up a renewal before that:
   * once it runs out another process may take it and send, and this one's request in flight
   * must not still be going (a database this process cannot reach, the others can).
   */
  #confirmed(asked: number): void {
    const { leaseMs, renewMs } = this.#options
    clearTimeout(this.#expiry)
    const left = asked + leaseMs - Math.min(renewMs, leaseMs / 2) - performance.now()
    this.#expiry = setTimeout(() => this.#lose(), Math.max(0, left))
    this.#expiry.unref()
  }

  #lose(): void {
    if (!this.#held) return
    this.#held = false
    this.#stopRenewing()
    this.#options.onLost()
  }

  #stopRenewing(): void {
    clearInterval(this.#renewal)
    this.#renewal = undefined
    clearTimeout(this.#expiry)
    this.#expiry = undefined
  }
}
