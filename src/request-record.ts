import type { IncomingMessage, ServerResponse } from 'node:http'
import { performance } from 'node:perf_hooks'

import type { Logger } from './log/logger.js'
import type { RequestMetrics } from './metrics/service-metrics.js'
import type { Availability } from './ops/availability.js'
import type { StorageFaultLog } from './ops/storage-faults.js'
import { isWrite } from './request-answer.js'
import type { RequestState } from './request-state.js'

export interface RequestRecordParts {
  readonly logger: Logger
  readonly metrics: RequestMetrics | undefined
  readonly availability: Availability
  readonly faults: StorageFaultLog
}

/** Records a request once it has settled; `finished` is false when its answer never finished. */
export type RecordRequest = (
  req: IncomingMessage,
  res: ServerResponse,
  state: RequestState,
  finished: boolean,
) => void

/**
 * What a request leaves behind once it settles (http/request-accounting.ts): its place among the
 * requests in flight, a storage-fault episode's count of writes, its metrics and its log line,
 * with 499 for an answer that never finished (the client went away).
 */
export function createRequestRecorder(parts: RequestRecordParts): RecordRequest {
  const { logger, metrics, availability, faults } = parts
  const logRequests = logger.isEnabled?.('info') ?? true
  return (req, res, state, finished) => {
    if (state.counted) availability.leave()
    if (faults.inEpisode && finished && isWrite(state) && res.statusCode < 300) faults.wrote()
    if (!logRequests && metrics === undefined) return
    const status = finished ? res.statusCode : 499
    const elapsedMs = performance.now() - state.started
    metrics?.requestFinished(state.route, req.method, status, elapsedMs)
    if (!logRequests) return
    const entry = {
      requestId: state.requestId,
      method: req.method ?? '',
      path: state.path,
      status,
      durationMs: Math.round(elapsedMs * 1000) / 1000,
      sub: state.sub,
      traceId: state.traceId,
    }
    if (logger.request !== undefined) logger.request(entry)
    else logger.info('request', entry)
  }
}
