import type { DeliveryAttempt } from '../domain/webhook.js'
import type { Logger } from '../log/logger.js'
import type { Store } from '../store/store.js'
import type { AllowList } from './address-policy.js'

/** What every endpoint's loop shares: the store, the settings, the clock and the counters. */
export interface LoopContext {
  readonly store: Pick<Store, 'webhooks' | 'events'>
  readonly logger: Logger
  readonly now: () => number
  readonly newId: () => string
  readonly random: () => number
  readonly timeoutMs: number
  readonly retrySchedule: readonly number[]
  readonly allow: AllowList
  /** True while deliveries must wait: maintenance, or a store that cannot write. */
  readonly paused: () => boolean
  /** This process, as lease holder. */
  readonly holder: string
  readonly leaseMs: number
  readonly renewMs: number
  /** Waits between looks while paused, without the lease, or after a store fault. */
  readonly pollMs: number
  readonly counted: (result: DeliveryAttempt['result']) => void
}
