import { ServiceError } from './errors.js'
import type { UserStatus } from './user.js'

export const LIFECYCLE_ACTIONS = ['activate', 'suspend'] as const
export type LifecycleAction = (typeof LIFECYCLE_ACTIONS)[number]

/**
 * The state machine of the user (docs/api.md, states) as data: where each action takes a user from each state; a missing
 * entry is a transition that is refused. Repeating an action on its own target is a no-op.
 */
export const TRANSITIONS: Readonly<
  Record<LifecycleAction, Partial<Record<UserStatus, UserStatus>>>
> = {
  activate: { pending: 'active', active: 'active', suspended: 'active' },
  suspend: { active: 'suspended', suspended: 'suspended' },
}

/** The status an action leads to, or invalid_transition. */
export function nextStatus(from: UserStatus, action: LifecycleAction): UserStatus {
  const to = TRANSITIONS[action][from]
  if (to === undefined) {
    // biome-ignore format: each Stryker directive must stay on the line before what it covers
    // Stryker disable next-line ConditionalExpression: activate is allowed from every status, so only suspend gets here
    const verb = action === 'suspend'
      ? 'suspended'
      : /* Stryker disable next-line StringLiteral: activate is allowed from every status, so only suspend gets here */ 'activated'
    throw new ServiceError('invalid_transition', `A ${from} user cannot be ${verb}.`)
  }
  return to
}
