import { JSON_ONLY } from '../route-defaults.js'
import { writeRoute } from './write-route.js'

/** `PUT /users/{id}`: the user's writable fields, all of them. */
export const replaceUser = writeRoute({
  operationId: 'replaceUser',
  method: 'PUT',
  mediaTypes: JSON_ONLY,
  summary: 'Replace a user',
  schema: 'UserReplace',
  write: 'replace',
})
