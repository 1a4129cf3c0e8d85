import { AsyncLocalStorage } from 'node:async_hooks'

import type { ChangeContext } from '../domain/event.js'

/**
 * Who is making the request being served: set by the HTTP layer around a handler, read by the user
 * operations when they call the store, so that no handler signature has to carry it.
 */
const current = new AsyncLocalStorage<ChangeContext>()

export function withChangeContext<T>(context: ChangeContext, run: () => T): T {
  return current.run(context, run)
}

export function currentChangeContext(): ChangeContext | undefined {
  return current.getStore()
}
