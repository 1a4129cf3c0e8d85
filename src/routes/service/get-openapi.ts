import type { Route } from '../route.js'
import { API_ROUTE } from '../route-defaults.js'

export const getOpenApi: Route = {
  ...API_ROUTE,
  operationId: 'getOpenApi',
  method: 'GET',
  path: '/openapi.json',
  scope: undefined,
  tag: 'service',
  summary: 'This OpenAPI document',
  responses: {
    200: { description: 'This document.', content: { 'application/json': { type: 'object' } } },
  },
  handle: async ({ services }) => ({ status: 200, body: await services.openApi() }),
}
