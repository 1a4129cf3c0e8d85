import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { writeFile } from 'node:fs/promises'
import path from 'node:path'
import { createInterface } from 'node:readline'
import { describe, it, type TestContext } from 'node:test'

import { MemoryStore } from '../../src/store/memory-store.js'
import { signatureHeader } from '../../src/webhooks/signature.js'
import { readRepoFile } from '../helpers/markdown.js'
import { makeTempDir } from '../helpers/service.js'
import { type EndpointWithSecret, startHooks } from '../helpers/webhook-api.js'

/** The receiver of docs/webhooks.md, as its reader would copy it. */
function receiverCode(): string {
  const text = readRepoFile('docs/webhooks.md')
  const section = text.slice(text.indexOf('\n## A receiver in Node'))
  const code = /```js\n([\s\S]*?)```/.exec(section)?.[1]
  assert.ok(code !== undefined, 'docs/webhooks.md has a js block under "A receiver in Node"')
  return code
}

interface Receiver {
  readonly url: string
  readonly lines: string[]
}

/** Runs the documented receiver with a secret, on a free port; stopped when the test ends. */
async function startReceiver(t: TestContext, secret: string): Promise<Receiver> {
  const code = receiverCode()
    .replace("'standardwebhooks'", `'${import.meta.resolve('standardwebhooks')}'`)
    .replace(
      '.listen(3000)',
      ".listen(0, '127.0.0.1', function () { console.log('port ' + this.address().port) })",
    )
  assert.ok(code.includes("'port ' + this.address().port"), 'the receiver listens on 3000')
  const file = path.join(await makeTempDir(t, 'webhook-receiver-'), 'receiver.mjs')
  await writeFile(file, code)
  const child = spawn(process.execPath, [file], {
    env: { ...process.env, WEBHOOK_SECRET: secret },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  t.after(() => {
    child.kill()
  })
  const lines: string[] = []
  const reader = createInterface({ input: child.stdout })
  const [first] = (await once(reader, 'line')) as [string]
  reader.on('line', (line: string) => lines.push(line))
  const port = /^port (\d+)$/.exec(first)?.[1]
  assert.ok(port !== undefined, first)
  return { url: `http://127.0.0.1:${port}/`, lines }
}

/** One delivery as the service signs it: with these secrets, at this time. */
async function deliver(
  receiver: Receiver,
  secrets: readonly string[],
  options: { seconds?: number; body?: string; id?: string } = {},
): Promise<number> {
  const id = options.id ?? 'msg_000000000000002a'
  const seconds = options.seconds ?? Math.floor(Date.now() / 1000)
  const body =
    options.body ??
    '{"type":"user.created","timestamp":"2026-11-22T10:00:00.000Z","data":{"id":"000000000000002a","type":"user.created","time":"2026-11-22T10:00:00.000Z","userId":"0193a5f2-7c1e-7d3a-9b2f-1c2d3e4f5a6b","version":1}}'
  const res = await fetch(receiver.url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': String(seconds),
      'webhook-signature': signatureHeader(secrets, id, seconds, body),
    },
    body,
  })
  await res.arrayBuffer()
  return res.status
}

describe('the receiver of docs/webhooks.md', () => {
  it('verifies deliveries signed with the secret the service showed, both during a rotation, and refuses the rest', async (t) => {
    const s = await startHooks(t, {
      name: 'memory',
      skip: false,
      make: () => ({ store: new MemoryStore() }),
    })
    const created = await s.createHook()
    const rotation = await s.hooks('POST', `/${created.id}:rotateSecret`)
    const rotated = rotation.json<EndpointWithSecret>()
    const current = await startReceiver(t, rotated.secret)
    assert.equal(await deliver(current, [rotated.secret]), 204)
    assert.equal(await deliver(current, [rotated.secret, created.secret]), 204)
    assert.equal(await deliver(current, [rotated.secret], { id: 'msg_000000000000002a' }), 204)
    // A receiver still on the previous secret verifies the overlap's second signature.
    const previous = await startReceiver(t, created.secret)
    assert.equal(await deliver(previous, [rotated.secret, created.secret]), 204)
    assert.equal(await deliver(previous, [rotated.secret]), 400)
    // A forged, altered or stale delivery.
    assert.equal(await deliver(current, [created.secret]), 400)
    const stale = Math.floor(Date.now() / 1000) - 3600
    assert.equal(await deliver(current, [rotated.secret], { seconds: stale }), 400)
    await new Promise((resolve) => setTimeout(resolve, 100))
    // The same webhook-id was handled once.
    assert.deepEqual(current.lines, ['user.created 0193a5f2-7c1e-7d3a-9b2f-1c2d3e4f5a6b 1'])
    assert.equal(previous.lines.length, 1)
  })
})
