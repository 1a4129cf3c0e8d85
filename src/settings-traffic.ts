/**
 * The settings of the traffic that comes in and goes out beyond the users API's own: rate limits
 * and the proxies in front, how long retried writes' keys are kept, and webhooks. Part of the one
 * table (src/settings.ts), which spreads them in.
 */
import {
  integer,
  listText,
  parseNetworks,
  parseProxies,
  parseRateLimit,
  parseRetrySchedule,
  rateLimitText,
  retryScheduleText,
} from './setting-parsers.js'
import { setting } from './setting-spec.js'

export const TRAFFIC_SETTINGS = {
  rateLimitSubject: setting({
    owner: 'service',
    env: ['RATE_LIMIT_SUBJECT'],
    default: undefined,
    parse: parseRateLimit,
    toText: rateLimitText,
    doc: 'requests per window for each token subject: `Q/W` (Q per W seconds) or `off`',
  }),
  rateLimitAddress: setting({
    owner: 'service',
    env: ['RATE_LIMIT_ADDRESS'],
    default: undefined,
    parse: parseRateLimit,
    toText: rateLimitText,
    doc: 'requests per window for each client address without a valid token: `Q/W` or `off`',
  }),
  idempotencyTtlS: setting({
    owner: 'service',
    env: ['IDEMPOTENCY_TTL_S'],
    default: 86_400,
    parse: integer(1, 604_800),
    doc: 'seconds an `Idempotency-Key` and its answer are kept after the answer',
  }),
  rateLimitMaxClients: setting({
    owner: 'service',
    env: ['RATE_LIMIT_MAX_CLIENTS'],
    default: 100_000,
    parse: integer(1, 10_000_000),
    doc: 'the most subjects and addresses the rate limits count at once',
  }),
  trustedProxies: setting<readonly string[], 'service'>({
    owner: 'service',
    env: ['TRUSTED_PROXIES'],
    default: [],
    parse: parseProxies,
    toText: listText,
    doc: 'proxies (addresses, CIDR blocks) whose X-Forwarded-For names the client',
  }),
  webhookTimeoutMs: setting({
    owner: 'service',
    env: ['WEBHOOK_TIMEOUT_MS'],
    default: 15_000,
    parse: integer(1, 120_000),
    doc: 'a webhook attempt must get its answer status and headers within this (ms)',
  }),
  webhookRetrySchedule: setting<readonly number[], 'service'>({
    owner: 'service',
    env: ['WEBHOOK_RETRY_SCHEDULE'],
    default: [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000],
    parse: parseRetrySchedule,
    toText: retryScheduleText,
    doc: 'the delays (ms) before the retries of a failed webhook attempt, before jitter',
  }),
  webhookAllowNetworks: setting<readonly string[], 'service'>({
    owner: 'service',
    env: ['WEBHOOK_ALLOW_NETWORKS'],
    default: [],
    parse: parseNetworks,
    toText: listText,
    doc: 'CIDR blocks webhooks may reach although they are not global unicast',
  }),
  webhooksMax: setting({
    owner: 'service',
    env: ['WEBHOOKS_MAX'],
    default: 20,
    parse: integer(1, 1000),
    doc: 'the most webhook endpoints the service keeps',
  }),
} as const
