/**
 * A child process for the webhook restart tests: `node --import tsx webhook-cursor-writer.ts
 * DATA_DIR MODE` opens a FileStore there, creates one endpoint with its cursor at event 0 and
 * prints `ready <id>`; then, MODE `advance`: moves the cursor one event on every few milliseconds
 * as a delivery does after a 2xx, printing `acked <cursor>` once each move resolved, until killed;
 * MODE `set`: moves it as a client does (PUT) to event 0x2a and prints `set <cursor>`, then waits
 * to be killed. stdout is a pipe: its writes are synchronous, so a printed line was resolved.
 */

import { formatEventId } from '../../src/domain/event.js'
import { FileStore } from '../../src/store/file/file-store.js'
import { makeWebhook } from './webhook-values.js'

const [dataDir, mode] = process.argv.slice(2)
if (dataDir === undefined || (mode !== 'advance' && mode !== 'set'))
  throw new Error('usage: webhook-cursor-writer.ts DATA_DIR advance|set')

const store = new FileStore({ dataDir })
await store.open()
const hook = makeWebhook()
const id = hook.endpoint.id
await store.webhooks.create(hook, formatEventId(0), 20)
process.stdout.write(`ready ${id}\n`)

if (mode === 'set') {
  await store.webhooks.setCursor(id, formatEventId(0x2a))
  process.stdout.write(`set ${formatEventId(0x2a)}\n`)
  setInterval(() => undefined, 1000)
} else {
  for (let n = 0; ; n += 1) {
    const moved = await store.webhooks.advanceCursor(id, formatEventId(n), formatEventId(n + 1))
    if (!moved) throw new Error('the cursor moved under the writer')
    process.stdout.write(`acked ${formatEventId(n + 1)}\n`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}
