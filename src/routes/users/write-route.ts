import { type Route, ref } from '../route.js'
import { API_ROUTE } from '../route-defaults.js'
import { keyedChange, USER_ANSWER, userAnswer, userId } from './user-replies.js'

/** What tells `PUT` and `PATCH /users/{id}` apart. */
export interface WriteRouteOptions {
  readonly operationId: string
  readonly method: 'PUT' | 'PATCH'
  readonly mediaTypes: readonly string[]
  readonly summary: string
  /** The request body's schema, by its name in components.schemas. */
  readonly schema: string
  /** The operation that makes the change. */
  readonly write: 'replace' | 'patch'
}

/** A conditional write of a body to `/users/{id}`, answered 200 with the user. */
export function writeRoute(options: WriteRouteOptions): Route {
  const { operationId, method, mediaTypes, summary, schema, write } = options
  return {
    ...API_ROUTE,
    operationId,
    method,
    path: '/users/{id}',
    scope: 'users:write',
    body: 'required',
    mediaTypes,
    tagged: true,
    idempotencyKey: true,
    summary,
    request: { schema: ref(schema) },
    responses: { 200: USER_ANSWER },
    // Another user's email, or a user at the highest version.
    errors: [409],
    async handle(context) {
      const answerOf = userAnswer(200)
      return answerOf(
        await context.services.operations[write](
          userId(context),
          context.body,
          context.preconditions,
          keyedChange(context, answerOf),
        ),
      )
    },
  }
}
