import type { UserRecord } from '../domain/user.js'
import type { EventStreams } from '../event-streams/event-streams.js'
import type { Availability } from '../ops/availability.js'
import type { CursorCodec } from '../users/cursor.js'
import type { UserOperations } from '../users/user-operations.js'
import type { DeliveryCursorCodec } from '../webhooks/delivery-cursor.js'
import type { WebhookOperations } from '../webhooks/webhook-operations.js'
import type { BulkServices } from './bulk/bulk-services.js'

/** What the handlers work with, built once by the service and handed to every handler call. */
export interface RouteServices {
  /** The prefix of the API routes, such as `/v1` ('' for none): links and Location carry it. */
  readonly basePath: string
  readonly operations: UserOperations
  /** Signs and reads list cursors. */
  readonly cursors: CursorCodec
  /** What can be done to webhook endpoints (docs/webhooks.md). */
  readonly webhooks: WebhookOperations
  /** Signs and reads the cursors of the delivery log's pages. */
  readonly deliveryCursors: DeliveryCursorCodec
  /** The most users a `q` page examines before it answers (LIST_SCAN_BUDGET). */
  readonly scanBudget: number
  /** The users of these ids that exist, in any order (a batch get); undefined: one get per id. */
  readonly getMany: ((ids: readonly string[]) => Promise<readonly UserRecord[]>) | undefined
  readonly availability: Availability
  readonly events: EventStreams
  readonly bulk: BulkServices
  /** The OpenAPI document, as served: JSON text. */
  readonly openApi: () => Promise<string>
  /** The metrics, rendered for `GET /metrics`; undefined when they are off. */
  readonly metrics: { render(): string } | undefined
}
