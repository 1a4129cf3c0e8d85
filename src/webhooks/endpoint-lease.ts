/**
 * The lease of delivering to one endpoint (one process at a time, across replicas): taken before
 * an attempt, renewed in the background while held, and given back when delivery stops.
 */
import type { WebhookStore } from '../store/webhook-store.js'

export interface EndpointLeaseOptions {
  readonly webhooks: WebhookStore
  readonly id: string
  readonly holder: string
  readonly leaseMs: number
  readonly renewMs: number
  /** The lease ran out and another process holds it: what is in flight must be abandoned. */
  readonly onLost: () => void
}

export class EndpointLease {
  readonly #options: EndpointLeaseOptions
  #held = false
  #renewal: NodeJS.Timeout | undefined

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
    this.#held = await webhooks.lease(id, holder, leaseMs)
    if (this.#held && this.#renewal === undefined) {
      this.#renewal = setInterval(() => void this.#renew(), renewMs)
      this.#renewal.unref()
    }
    return this.#held
  }

  /** Stops renewing and gives the lease back (best effort: it runs out anyway). */
  async release(): Promise<void> {
    this.#stopRenewing()
    if (!this.#held) return
    this.#held = false
    const { webhooks, id, holder } = this.#options
    await webhooks.releaseLease(id, holder).catch(() => undefined)
  }

  async #renew(): Promise<void> {
    const { webhooks, id, holder, leaseMs } = this.#options
    // A store fault is not a loss: the lease runs on until it is renewed or runs out.
    const held = await webhooks.lease(id, holder, leaseMs).catch(() => true)
    if (held || !this.#held) return
    this.#held = false
    this.#stopRenewing()
    this.#options.onLost()
  }

  #stopRenewing(): void {
    clearInterval(this.#renewal)
    this.#renewal = undefined
  }
}
