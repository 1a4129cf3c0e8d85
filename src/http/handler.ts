import type { IncomingHttpHeaders } from 'node:http'

import type { ChangeContext } from '../domain/change-context.js'
import type { Reply } from './respond.js'

/** What a handler sees of a request that passed routing, the token check and body parsing. */
export interface HandlerContext {
  /** Path parameters, percent-decoded. */
  readonly params: Readonly<Record<string, string>>
  /** The query string as sent, without the `?` ('' when there is none). */
  readonly rawQuery: string
  /** The parsed JSON body; undefined when the route takes none or it was empty. */
  readonly body: unknown
  readonly headers: IncomingHttpHeaders
  /** Who makes the request (§10): the token's subject and the request id, for the events of its writes. */
  readonly change: ChangeContext
}

export type Handler = (context: HandlerContext) => Reply | Promise<Reply>
