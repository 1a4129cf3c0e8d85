import { type Route, ref } from '../route.js'
import { ROOT_ROUTE } from '../route-defaults.js'

const LIVENESS = 'Liveness: 200 while the process runs'
const READINESS = 'Readiness: 200 when the service takes traffic'

export const getHealth: Route = {
  ...ROOT_ROUTE,
  operationId: 'getHealth',
  method: 'GET',
  path: '/healthz',
  summary: LIVENESS,
  responses: { 200: { description: LIVENESS, content: { 'application/json': ref('Status') } } },
  handle: () => ({ status: 200, body: '{"status":"ok"}' }),
}

export const getReadiness: Route = {
  ...ROOT_ROUTE,
  operationId: 'getReadiness',
  method: 'GET',
  path: '/readyz',
  summary: READINESS,
  responses: { 200: { description: READINESS, content: { 'application/json': ref('Status') } } },
  // Starting, maintenance, overload, shutdown or storage faults (docs/operations.md).
  errors: [503],
  handle({ services }) {
    const refusal = services.availability.refusal('readiness')
    if (refusal !== undefined) throw refusal
    return { status: 200, body: '{"status":"ready"}' }
  },
}
