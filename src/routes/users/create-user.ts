import { checkUntagged } from '../../domain/preconditions.js'
import type { UserRecord } from '../../domain/user.js'
import type { Reply } from '../../http/respond.js'
import { type Route, ref } from '../route.js'
import { API_ROUTE, JSON_ONLY } from '../route-defaults.js'
import { keyedChange, userAnswer } from './user-replies.js'

export const createUser: Route = {
  ...API_ROUTE,
  operationId: 'createUser',
  method: 'POST',
  path: '/users',
  scope: 'users:write',
  body: 'required',
  mediaTypes: JSON_ONLY,
  idempotencyKey: true,
  summary: 'Create a user',
  request: { schema: ref('UserCreate') },
  responses: {
    201: {
      description: 'Created.',
      headers: ['ETag', 'Location'],
      content: { 'application/json': ref('User') },
    },
  },
  // Another user's email.
  errors: [409],
  async handle(context) {
    // The collection exists and has no ETag: If-Match: * holds, any tag or If-None-Match: * is 412.
    checkUntagged(context.preconditions, false)
    const created = userAnswer(201)
    const answerOf = (record: UserRecord | undefined): Reply => ({
      ...created(record),
      headers: { location: `${context.services.basePath}/users/${record?.user.id ?? ''}` },
    })
    return answerOf(
      await context.services.operations.create(context.body, keyedChange(context, answerOf)),
    )
  },
}
