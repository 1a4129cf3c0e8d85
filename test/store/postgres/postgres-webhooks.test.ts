import { describe, type TestContext } from 'node:test'

import { PostgresStore } from '../../../src/store/postgres/postgres-store.js'
import { freshSchema, requireDatabaseUrl, SKIP_POSTGRES } from '../../helpers/postgres.js'
import { describeWebhookStoreContract } from '../../helpers/webhook-store-suite.js'

/** A store on a schema of its own (not opened). */
function newStore(t: TestContext, schema = freshSchema(t)): PostgresStore {
  return new PostgresStore({ url: requireDatabaseUrl(), schema, probeIntervalMs: 100 })
}

describe('PostgresStore: webhooks', { skip: SKIP_POSTGRES }, () => {
  describeWebhookStoreContract('PostgresStore', (t) => Promise.resolve(newStore(t)))
})
