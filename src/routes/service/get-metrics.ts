import { EXPOSITION_CONTENT_TYPE } from '../../metrics/service-metrics.js'
import type { Route } from '../route.js'
import { ROOT_ROUTE, TEXT } from '../route-defaults.js'

const SUMMARY = 'Metrics in the Prometheus text format (METRICS=off hides it)'

/** `GET /metrics` (docs/operations.md); left out of the routes served when METRICS=off. */
export const getMetrics: Route = {
  ...ROOT_ROUTE,
  operationId: 'getMetrics',
  method: 'GET',
  path: '/metrics',
  summary: SUMMARY,
  responses: { 200: { description: SUMMARY, content: { 'text/plain': TEXT } } },
  handle: ({ services }) => ({
    status: 200,
    body: services.metrics?.render() ?? '',
    contentType: EXPOSITION_CONTENT_TYPE,
  }),
}
