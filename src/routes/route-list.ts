import { exportUsers } from './bulk/export-users.js'
import { importUsers } from './bulk/import-users.js'
import { listEvents } from './events/list-events.js'
import type { Route } from './route.js'
import { getMetrics } from './service/get-metrics.js'
import { getOpenApi } from './service/get-openapi.js'
import { getHealth, getReadiness } from './service/probes.js'
import { createUser } from './users/create-user.js'
import { deleteUser } from './users/delete-user.js'
import { getUser } from './users/get-user.js'
import { listUsers } from './users/list-users.js'
import { replaceUser } from './users/replace-user.js'
import { revokeTokens } from './users/revoke-tokens.js'
import { activateUser, suspendUser } from './users/transition-user.js'
import { updateUser } from './users/update-user.js'
import { createWebhook } from './webhooks/create-webhook.js'
import { deleteWebhook } from './webhooks/delete-webhook.js'
import { getWebhook } from './webhooks/get-webhook.js'
import { listDeliveries } from './webhooks/list-deliveries.js'
import { listWebhooks } from './webhooks/list-webhooks.js'
import { rotateSecret } from './webhooks/rotate-secret.js'
import { updateWebhook } from './webhooks/update-webhook.js'
import { getWebhookCursor, putWebhookCursor } from './webhooks/webhook-cursor.js'

export { getMetrics }

/**
 * Every route the service answers, in the order the OpenAPI document lists them. Each is declared
 * once, in its own file; the router, the checks, the handler call and the document read it.
 */
export const ROUTES: readonly Route[] = [
  listUsers,
  createUser,
  exportUsers,
  importUsers,
  getUser,
  replaceUser,
  updateUser,
  deleteUser,
  activateUser,
  suspendUser,
  revokeTokens,
  listEvents,
  listWebhooks,
  createWebhook,
  getWebhook,
  updateWebhook,
  deleteWebhook,
  rotateSecret,
  listDeliveries,
  getWebhookCursor,
  putWebhookCursor,
  getOpenApi,
  getHealth,
  getReadiness,
  getMetrics,
]
