import { attemptJson } from '../../domain/webhook.js'
import { badParameter, readQueryParameters } from '../../http/query-parameters.js'
import { NOT_BLANK } from '../parameter-schemas.js'
import { type Json, type Route, ref } from '../route.js'
import { WEBHOOK_ROUTE, webhookId } from './webhook-replies.js'

export const DEFAULT_ATTEMPT_LIMIT = 20
export const MAX_ATTEMPT_LIMIT = 100

/** `GET /webhooks/{id}/deliveries`: the endpoint's delivery log, newest attempt first. */
export const listDeliveries: Route = {
  ...WEBHOOK_ROUTE,
  operationId: 'listWebhookDeliveries',
  method: 'GET',
  path: '/webhooks/{id}/deliveries',
  cacheable: true,
  summary: "List a webhook endpoint's delivery attempts, newest first",
  parameters: deliveryParameters(),
  responses: {
    200: {
      description: 'A page of attempts; a page with more after it carries Link rel="next".',
      headers: ['Link'],
      content: { 'application/json': ref('DeliveryPage') },
    },
  },
  async handle(context) {
    const { webhooks, deliveryCursors, basePath } = context.services
    const id = webhookId(context)
    const params = readQueryParameters(context.rawQuery, ['limit', 'cursor'], 'the delivery log')
    const limit = parseLimit(params.get('limit'))
    const cursorText = params.get('cursor')
    let before: string | undefined
    if (cursorText !== undefined) {
      const state = deliveryCursors.decode(cursorText)
      if (state.webhookId !== id) throw badParameter('cursor', 'was made for another endpoint')
      before = state.before
    }
    const page = await webhooks.attempts(id, limit, before)
    const last = page.items[page.items.length - 1]
    const nextCursor =
      page.hasMore && last !== undefined
        ? deliveryCursors.encode({ webhookId: id, before: last.id })
        : null
    const body = `{"items":[${page.items.map(attemptJson).join(',')}],"nextCursor":${JSON.stringify(nextCursor)}}`
    if (nextCursor === null) return { status: 200, body }
    const next = `${basePath}/webhooks/${id}/deliveries?limit=${limit}&cursor=${nextCursor}`
    return { status: 200, body, headers: { link: `<${next}>; rel="next"` } }
  },
}

function parseLimit(text: string | undefined): number {
  if (text === undefined) return DEFAULT_ATTEMPT_LIMIT
  const limit = /^\d{1,3}$/.test(text) ? Number(text) : Number.NaN
  if (!(limit >= 1 && limit <= MAX_ATTEMPT_LIMIT))
    throw badParameter('limit', `must be a whole number from 1 to ${MAX_ATTEMPT_LIMIT}`)
  return limit
}

function deliveryParameters(): Json[] {
  return [
    {
      name: 'limit',
      in: 'query',
      required: false,
      schema: {
        type: 'integer',
        minimum: 1,
        maximum: MAX_ATTEMPT_LIMIT,
        default: DEFAULT_ATTEMPT_LIMIT,
      },
      description:
        'Attempts per page. Each parameter at most once; an unknown, empty or malformed one is 400 bad_request.',
    },
    {
      name: 'cursor',
      in: 'query',
      required: false,
      schema: { type: 'string', ...NOT_BLANK },
      description: 'The nextCursor of the previous page of this endpoint; any other is 400.',
    },
  ]
}
