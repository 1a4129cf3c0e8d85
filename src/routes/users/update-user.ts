import { MERGE_PATCH } from '../route-defaults.js'
import { writeRoute } from './write-route.js'

/** `PATCH /users/{id}`: some of the user's fields, as a JSON Merge Patch. */
export const updateUser = writeRoute({
  operationId: 'updateUser',
  method: 'PATCH',
  mediaTypes: MERGE_PATCH,
  summary: 'Change some fields of a user (JSON Merge Patch)',
  schema: 'UserPatch',
  write: 'patch',
})
