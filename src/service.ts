import { once as emitted } from 'node:events'
import type { RequestListener, Server } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'

import { createRequestListener } from './app.js'
import { createAuthenticator } from './auth/authenticate.js'
import type { KeySet } from './auth/keys.js'
import { createIdGenerator } from './domain/uuid7.js'
import { createEventStreams, type EventStreamsOptions } from './event-streams/event-streams.js'
import { createClientErrorHandler, createConnectRefusal } from './http/client-errors.js'
import { createHttpServer } from './http/http-server.js'
import { isClosing, LINGER_MS } from './http/lingering-close.js'
import { createRateLimiter } from './http/rate-limiter.js'
import type { Logger } from './log/logger.js'
import { createServiceMetrics } from './metrics/service-metrics.js'
import { once } from './once.js'
import { Availability } from './ops/availability.js'
import { createLocalSlots, type SharedSlots } from './ops/shared-slots.js'
import { RequestKeys } from './request-idempotency.js'
import { createBulkServices } from './routes/bulk/bulk-services.js'
import { ADMIN_ROUTES, getMetrics, ROUTES } from './routes/route-list.js'
import { pickSettings, type ServiceSettings } from './settings-by-owner.js'
import type { OpenedStore } from './store/open-store.js'
import type { Store } from './store/store.js'
import { createCursorCodec } from './users/cursor.js'
import { createUserOperations } from './users/user-operations.js'
import { createAllowList, refusedUrlHost } from './webhooks/address-policy.js'
import { createWebhookDelivery } from './webhooks/delivery.js'
import { createDeliveryCursorCodec } from './webhooks/delivery-cursor.js'
import { newSecret } from './webhooks/signature.js'
import { createWebhookOperations } from './webhooks/webhook-operations.js'

export const SERVICE_VERSION = '0.1.0'

/**
 * What the service is built from: every setting given, none invented here. The settings and their
 * defaults are src/settings.ts's; createUserService (process/create-user-service.ts) fills them in.
 */
export interface ServiceOptions extends ServiceSettings {
  /**
   * The store and its data directory, owned by openStore (store/open-store.ts): the service claims
   * it before listening, loads it in open() and closes it in close(), but never makes one.
   */
  store: OpenedStore
  keys: KeySet
  /** Milliseconds since the epoch. */
  now: () => number
  logger: Logger
  /** The file whose presence means maintenance; undefined: never. */
  maintenanceFile: string | undefined
  /** Tuning of the event streams (tests shorten them): heartbeat, buffer bound, stall time. */
  eventStreams?: Pick<EventStreamsOptions, 'heartbeatMs' | 'maxBufferBytes' | 'stallMs'> | undefined
  /**
   * Where MAX_EVENT_STREAMS and the one import at a time are counted; default this process alone.
   * The workers of WORKERS > 1 count them in their primary, so that the limits are the service's.
   */
  slots?: SharedSlots | undefined
}

/**
 * How often the server looks for connections past their header or request time-out. Node's
 * default of 30 s lets a 1 s limit hold a connection for up to 31 s; this keeps every limit to
 * within half a second of its value, for the cost of a walk over the open connections.
 */
export const CONNECTION_CHECK_MS = 500

export interface ListenResult {
  url: string
  port: number
}

/** The service: a request handler to mount anywhere, and a server that listens when asked. */
export interface UserService {
  /** A plain node:http listener; it answers 503 until open() has loaded the store. */
  readonly handler: RequestListener
  /** A node:http server around the handler, with the time-outs set; it does not listen yet. */
  readonly server: Server
  readonly store: Store
  /** Loads the store; the handler is ready when it resolves. Idempotent; a failure is final. */
  open(): Promise<void>
  /** Takes the data directory's lock, listens, then loads the store (open() tells how that went). */
  listen(port?: number, host?: string): Promise<ListenResult>
  /** Waits for a listen() under way; refuses new requests, lets those in flight finish, closes. */
  close(): Promise<void>
}

/** The composition root: options → store, auth, operations, routes → listener and server. */
export function createService(options: ServiceOptions): UserService {
  const { logger, now, basePath, keys, leewaySeconds } = options
  const opened = options.store
  const { store } = opened
  const availability = new Availability({
    maintenanceFile: options.maintenanceFile,
    maxInflight: options.maxInflight,
    maxEventLoopDelayMs: options.maxEventLoopDelayMs,
    storeHealth: () => store.health(),
  })
  // A backup taken in maintenance copies the data directory: the store deletes nothing meanwhile.
  store.pauseUpkeep(() => availability.inMaintenance)
  // One id generator for the API and imports: ids keep increasing within the process.
  const newId = createIdGenerator()
  const operations = createUserOperations({ store, now, newId, writeGate: availability.writeGate })
  const firstKey = keys.keys[0]
  if (firstKey === undefined) throw new Error('createUserService: at least one key is needed')
  const allow = createAllowList(options.webhookAllowNetworks)
  const delivery = createWebhookDelivery({
    store,
    logger,
    now,
    paused: () => availability.backgroundPaused(),
    webhookTimeoutMs: options.webhookTimeoutMs,
    webhookRetrySchedule: options.webhookRetrySchedule,
    webhookAllowNetworks: options.webhookAllowNetworks,
  })
  const webhooks = createWebhookOperations({
    webhooks: store.webhooks,
    feed: store.events,
    now,
    newId,
    newSecret,
    refusedHost: (url) => refusedUrlHost(url, allow),
    max: options.webhooksMax,
    delivery,
    writeGate: availability.writeGate,
  })
  const authenticator = createAuthenticator({
    keys,
    issuer: options.issuer,
    audience: options.audience,
    leewaySeconds,
    now,
  })
  const apiRoutes =
    options.metrics === false ? ROUTES.filter((route) => route !== getMetrics) : ROUTES
  const routes = options.adminPage ? [...apiRoutes, ...ADMIN_ROUTES] : apiRoutes
  const metrics =
    options.metrics === false
      ? undefined
      : createServiceMetrics({
          routes,
          usersStored: () => store.count(),
          tokenCache: () => authenticator.stats(),
          droppedLogLines: () => logger.dropped,
          dataDir: store.capabilities.dataDir,
          eventsAppended: () => store.events.appended,
          eventStreams: () => events.openStreams,
          webhooks: () => delivery.counts(),
          feedStalls: () => ({
            seconds: store.events.stalledSeconds ?? 0,
            total: store.events.stalls ?? 0,
          }),
        })
  if (metrics !== undefined) opened.observeWrites(metrics.storeWrite)
  const slots = options.slots ?? createLocalSlots()
  const events = createEventStreams({
    feed: store.events,
    maxStreams: options.maxEventStreams,
    slots,
    leewaySeconds,
    now,
    ...options.eventStreams,
  })
  const handler = createRequestListener({
    basePath,
    authenticator,
    availability,
    routes,
    services: {
      basePath,
      operations,
      cursors: createCursorCodec(firstKey.secret),
      webhooks,
      deliveryCursors: createDeliveryCursorCodec(firstKey.secret),
      scanBudget: options.listScanBudget,
      getMany: store.getMany.bind(store),
      availability,
      events,
      bulk: createBulkServices({
        store,
        slots,
        now,
        newId,
        writeGate: availability.writeGate,
        ...pickSettings(options, ['bulk']),
      }),
      // Built at the first request for it, not at every start: a 140 KB document few ask for.
      openApi: once(async () => {
        const { createOpenApiDocument } = await import('./openapi/document.js')
        return JSON.stringify(
          createOpenApiDocument({ basePath, version: SERVICE_VERSION, routes: apiRoutes }),
        )
      }),
      metrics,
    },
    logger,
    metrics,
    corsOrigins: options.corsOrigins,
    rateLimiter: createRateLimiter({
      subject: options.rateLimitSubject,
      address: options.rateLimitAddress,
      maxClients: options.rateLimitMaxClients,
      trustedProxies: options.trustedProxies,
      now,
    }),
    requestKeys: new RequestKeys({
      keys: store.keys,
      ttlSeconds: options.idempotencyTtlS,
      now,
      logger,
      writeGate: availability.writeGate,
    }),
  })
  const server = createHttpServer(handler, { ...options, connectionCheckMs: CONNECTION_CHECK_MS })
  server.on('clientError', createClientErrorHandler(logger))
  server.on('connect', createConnectRefusal(logger))
  // Connections still closing in stages hold an answer on its way out: shutdown waits for them.
  const sockets = new Set<Socket>()
  server.on('connection', (socket: Socket) => {
    sockets.add(socket)
    socket.once('close', () => {
      sockets.delete(socket)
    })
  })

  let opening: Promise<void> | undefined
  let listening: Promise<ListenResult> | undefined
  let closed = false
  const open = (): Promise<void> => {
    if (closed) return Promise.reject(new Error('this service was closed: create another one'))
    opening ??= (async () => {
      availability.start()
      metrics?.start()
      await opened.open()
      availability.markReady()
      delivery.start()
    })()
    return opening
  }

  const startListening = async (port: number, host: string): Promise<ListenResult> => {
    opened.claim()
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(port, host, () => {
        server.off('error', reject)
        resolve()
      })
    })
    const address = server.address() as AddressInfo
    // Loading runs after listening, so that readiness can say 503 while it lasts.
    // Not an 'error' of the server, which ends a process where nobody listens: open() rejects.
    open().catch((error: unknown) => {
      logger.error('could not load the store', { error: String(error) })
    })
    const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address
    return { url: `http://${shown}:${address.port}`, port: address.port }
  }

  return {
    handler,
    server,
    store,
    open,
    listen(port = 0, host = '127.0.0.1') {
      if (closed) return Promise.reject(new Error('this service was closed: create another one'))
      listening = startListening(port, host)
      return listening
    },
    async close() {
      closed = true
      // A listen() under way finishes first, so that what it opens is closed here, not after.
      await listening?.catch(() => undefined)
      availability.beginShutdown()
      // Streams would hold close() until its time-out: they end now, and consumers resume later.
      events.close()
      // Attempts in flight are abandoned, unlogged (their events come again after a restart); a
      // step waiting on the store (for a lock) is waited for as the requests are, then cut.
      let delivering = true
      const deliveryStopped = delivery.close().finally(() => {
        delivering = false
      })
      const serverClosed = server.listening ? emitted(server.close(), 'close') : undefined
      server.closeIdleConnections()
      const deadline = Date.now() + options.shutdownTimeoutMs
      while ((availability.inflight > 0 || delivering) && Date.now() < deadline) await sleep(25)
      const lingerDeadline = Date.now() + LINGER_MS
      while ([...sockets].some(isClosing) && Date.now() < lingerDeadline) await sleep(25)
      server.closeAllConnections()
      await serverClosed
      availability.stop()
      metrics?.stop()
      await opening?.catch(() => undefined)
      await opened.close()
      await deliveryStopped
    },
  }
}
