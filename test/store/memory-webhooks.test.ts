import { MemoryStore } from '../../src/store/memory-store.js'
import { describeWebhookStoreContract } from '../helpers/webhook-store-suite.js'

describeWebhookStoreContract('MemoryStore', () => Promise.resolve(new MemoryStore()))
