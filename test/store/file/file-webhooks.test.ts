import path from 'node:path'
import type { TestContext } from 'node:test'

import { FileStore } from '../../../src/store/file/file-store.js'
import { makeTempDir } from '../../helpers/service.js'
import { describeWebhookStoreContract } from '../../helpers/webhook-store-suite.js'

async function newDataDir(t: TestContext): Promise<string> {
  return path.join(await makeTempDir(t, 'file-webhooks-test-'), 'data')
}

describeWebhookStoreContract(
  'FileStore',
  async (t) => new FileStore({ dataDir: await newDataDir(t) }),
)
