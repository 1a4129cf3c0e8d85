/** What most routes share; each route file spreads one of these and names what differs. */
export const API_ROUTE = {
  root: false,
  body: 'none',
  mediaTypes: [],
  cacheable: false,
  tagged: false,
  tag: 'users',
} as const

/** Probes and metrics: at the server root, outside BASE_PATH, with no token and no availability check. */
export const ROOT_ROUTE = { ...API_ROUTE, root: true, scope: undefined, tag: 'service' } as const

export const JSON_ONLY = ['application/json'] as const
export const MERGE_PATCH = ['application/merge-patch+json', 'application/json'] as const
export const NDJSON = 'application/x-ndjson'

/** The schema of a body that is text (NDJSON, the metrics exposition, an event stream). */
export const TEXT = { type: 'string' } as const
