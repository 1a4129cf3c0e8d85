import assert from 'node:assert/strict'
import { readdir, readFile, stat, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'

import { formatEventId } from '../../../src/domain/event.js'
import type { DeliveryAttempt, StoredWebhook } from '../../../src/domain/webhook.js'
import { FileStore } from '../../../src/store/file/file-store.js'
import { KEPT_ATTEMPTS } from '../../../src/store/webhook-store.js'
import { sleep, spawnService } from '../../helpers/child.js'
import { helperScript } from '../../helpers/child-scripts.js'
import { waitFor } from '../../helpers/ops.js'
import { createMemoryLogger, makeTempDir } from '../../helpers/service.js'
import { makeUser } from '../../helpers/store-users.js'
import { describeWebhookStoreContract } from '../../helpers/webhook-store-suite.js'
import { changeWebhook, makeAttempt, makeWebhook } from '../../helpers/webhook-values.js'

async function newDataDir(t: TestContext): Promise<string> {
  return path.join(await makeTempDir(t, 'file-webhooks-test-'), 'data')
}

/** A closed store in `dataDir` with one endpoint (its cursor at event 7) and one attempt logged. */
async function oneLoggedAttempt(
  dataDir: string,
): Promise<{ hook: StoredWebhook; id: string; attempt: DeliveryAttempt }> {
  const first = new FileStore({ dataDir })
  await first.open()
  const hook = makeWebhook()
  const id = hook.endpoint.id
  await first.webhooks.create(hook, formatEventId(7), 20)
  const attempt = makeAttempt(8)
  await first.webhooks.logAttempt(id, attempt)
  await first.close()
  return { hook, id, attempt }
}

/** Opens a FileStore on `dataDir`, closed when the test ends, with the lines it logs. */
async function openAt(t: TestContext, dataDir: string) {
  const logs: Record<string, unknown>[] = []
  const store = new FileStore({ dataDir, logger: createMemoryLogger(logs) })
  await store.open()
  t.after(() => store.close())
  return { store, logs }
}

describeWebhookStoreContract(
  'FileStore',
  async (t) => new FileStore({ dataDir: await newDataDir(t) }),
)

const ZERO = formatEventId(0)

describe('FileStore: webhook files', () => {
  it('keeps an endpoint, its cursor and its log in files of mode 0600 in DATA_DIR/webhooks', async (t) => {
    const dataDir = await newDataDir(t)
    const { store } = await openAt(t, dataDir)
    const hook = makeWebhook()
    const id = hook.endpoint.id
    await store.webhooks.create(hook, formatEventId(9), 20)
    await store.webhooks.update(id, (current) => changeWebhook(current, { description: 'CRM' }))
    await store.webhooks.logAttempt(id, makeAttempt(10))
    const dir = path.join(dataDir, 'webhooks')
    // An attempt's line is appended at the next flush, within about a second.
    await waitFor('the delivery log', async () =>
      (await readdir(dir)).includes(`${id}.log`) ? true : undefined,
    )
    assert.deepEqual((await readdir(dir)).sort(), [`${id}.cursor`, `${id}.json`, `${id}.log`])
    for (const name of await readdir(dir)) {
      assert.equal((await stat(path.join(dir, name))).mode & 0o777, 0o600, name)
    }
    assert.equal((await stat(dir)).mode & 0o777, 0o700)
    const stored = JSON.parse(await readFile(path.join(dir, `${id}.json`), 'utf8')) as {
      secret: string
      endpoint: { description: string; version: number }
    }
    assert.equal(stored.secret, hook.secret)
    assert.equal(stored.endpoint.description, 'CRM')
    assert.equal(stored.endpoint.version, 2)
    assert.equal(await readFile(path.join(dir, `${id}.cursor`), 'utf8'), `${formatEventId(9)}\n`)
  })

  it('removes the three files of a deleted endpoint', async (t) => {
    const dataDir = await newDataDir(t)
    const { store } = await openAt(t, dataDir)
    const hook = makeWebhook()
    const kept = makeWebhook()
    await store.webhooks.create(hook, ZERO, 20)
    await store.webhooks.create(kept, ZERO, 20)
    await store.webhooks.logAttempt(hook.endpoint.id, makeAttempt(1))
    await store.webhooks.delete(hook.endpoint.id)
    const names = await readdir(path.join(dataDir, 'webhooks'))
    assert.deepEqual(names.sort(), [`${kept.endpoint.id}.cursor`, `${kept.endpoint.id}.json`])
  })

  it('finds after a restart every endpoint, its cursor and its log as they were at close', async (t) => {
    const dataDir = await newDataDir(t)
    const first = new FileStore({ dataDir })
    await first.open()
    const moved = makeWebhook()
    const set = makeWebhook({ eventTypes: ['user.deleted'] })
    const rotated = makeWebhook()
    await first.webhooks.create(moved, formatEventId(3), 20)
    await first.webhooks.create(set, formatEventId(3), 20)
    await first.webhooks.create(rotated, formatEventId(3), 20)
    const after = await first.webhooks.update(rotated.endpoint.id, (current) =>
      changeWebhook(current, {}, { secret: 'whsec_bmV3', previousSecret: current.secret }),
    )
    assert.equal(
      await first.webhooks.advanceCursor(moved.endpoint.id, formatEventId(3), formatEventId(5)),
      true,
    )
    await first.webhooks.setCursor(set.endpoint.id, formatEventId(1))
    const attempts = [makeAttempt(4, 1), makeAttempt(4, 2, { result: 'succeeded', error: null })]
    for (const attempt of attempts) await first.webhooks.logAttempt(moved.endpoint.id, attempt)
    await first.close()

    const { store } = await openAt(t, dataDir)
    assert.deepEqual(await store.webhooks.list(), [moved, set, after])
    assert.equal(await store.webhooks.cursor(moved.endpoint.id), formatEventId(5))
    assert.equal(await store.webhooks.cursor(set.endpoint.id), formatEventId(1))
    assert.equal(await store.webhooks.cursor(rotated.endpoint.id), formatEventId(3))
    assert.deepEqual(await store.webhooks.attempts(moved.endpoint.id, 10), [...attempts].reverse())
    // The log goes on after a restart.
    const third = makeAttempt(5)
    await store.webhooks.logAttempt(moved.endpoint.id, third)
    assert.deepEqual((await store.webhooks.attempts(moved.endpoint.id, 1))[0], third)
  })

  it("gives the feed's head after a restart: at or past the newest event the log holds, below the next", async (t) => {
    const dataDir = await newDataDir(t)
    const first = new FileStore({ dataDir })
    await first.open()
    await first.create(makeUser())
    const user = await first.create(makeUser())
    await first.delete(user.user.id)
    const head = await first.events.head()
    assert.notEqual(head, ZERO)
    await first.close()
    const { store } = await openAt(t, dataDir)
    const restarted = await store.events.head()
    // The start numbers on from its clock's floor (idFloor): the head is there, no event between.
    assert.ok(restarted >= head, restarted)
    assert.deepEqual((await store.events.read({ after: head, limit: 10 })).items, [])
    const page = await store.events.read({ limit: 10 })
    assert.equal(page.items.at(-1)?.id, head)
    await store.create(makeUser())
    const next = await store.events.read({ after: restarted, limit: 10 })
    assert.equal(next.items.length, 1)
    assert.equal(await store.events.head(), next.items[0]?.id)
  })

  it('keeps a log file to about twice the kept attempts, and the newest after a restart', async (t) => {
    const dataDir = await newDataDir(t)
    const first = new FileStore({ dataDir })
    await first.open()
    const hook = makeWebhook()
    const id = hook.endpoint.id
    await first.webhooks.create(hook, ZERO, 20)
    const logged = Array.from({ length: KEPT_ATTEMPTS * 2 + 10 }, (_, i) => makeAttempt(i + 1))
    for (const attempt of logged) await first.webhooks.logAttempt(id, attempt)
    await first.close()
    const text = await readFile(path.join(dataDir, 'webhooks', `${id}.log`), 'utf8')
    const lines = text.split('\n').filter((line) => line !== '').length
    assert.ok(lines >= KEPT_ATTEMPTS && lines <= KEPT_ATTEMPTS * 2, `${lines} lines`)
    const { store } = await openAt(t, dataDir)
    const kept = await store.webhooks.attempts(id, KEPT_ATTEMPTS * 3)
    assert.equal(kept.length, KEPT_ATTEMPTS)
    assert.deepEqual(kept[0], logged.at(-1))
    assert.deepEqual(kept.at(-1), logged.at(-KEPT_ATTEMPTS))
  })

  it('passes over what a crash leaves: temp files, a torn log line, files of a deleted endpoint', async (t) => {
    const dataDir = await newDataDir(t)
    const { hook, id, attempt } = await oneLoggedAttempt(dataDir)
    const dir = path.join(dataDir, 'webhooks')
    const gone = makeWebhook().endpoint.id
    await writeFile(path.join(dir, `${id}.log`), '{"id":"0193', { flag: 'a' })
    await writeFile(path.join(dir, `${gone}.cursor`), `${ZERO}\n`)
    await writeFile(path.join(dir, `${gone}.log`), '')
    await writeFile(path.join(dir, `.${id}.json.abc1.tmp`), '{"endpoint":')

    const { store } = await openAt(t, dataDir)
    assert.deepEqual(await store.webhooks.list(), [hook])
    assert.equal(await store.webhooks.cursor(id), formatEventId(7))
    assert.deepEqual(await store.webhooks.attempts(id, 10), [attempt])
    assert.deepEqual((await readdir(dir)).sort(), [`${id}.cursor`, `${id}.json`, `${id}.log`])
  })

  it('keeps the first attempt logged after a start that found a torn last line', async (t) => {
    const dataDir = await newDataDir(t)
    const { id, attempt } = await oneLoggedAttempt(dataDir)
    // A power loss kept part of an append: the file ends inside a line.
    await writeFile(path.join(dataDir, 'webhooks', `${id}.log`), '{"id":"0193', { flag: 'a' })
    const second = new FileStore({ dataDir })
    await second.open()
    const next = makeAttempt(9)
    await second.webhooks.logAttempt(id, next)
    await second.close()

    const { store } = await openAt(t, dataDir)
    assert.deepEqual(await store.webhooks.attempts(id, 10), [next, attempt])
  })

  it('leaves a damaged endpoint file unloaded and says so; a lost cursor starts before every event', async (t) => {
    const dataDir = await newDataDir(t)
    const first = new FileStore({ dataDir })
    await first.open()
    const damaged = makeWebhook()
    const lost = makeWebhook()
    await first.webhooks.create(damaged, formatEventId(7), 20)
    await first.webhooks.create(lost, formatEventId(7), 20)
    await first.close()
    const dir = path.join(dataDir, 'webhooks')
    await writeFile(path.join(dir, `${damaged.endpoint.id}.json`), '{"endpoint":{"id":')
    await writeFile(path.join(dir, `${lost.endpoint.id}.cursor`), 'garbage\n')

    const { store, logs } = await openAt(t, dataDir)
    assert.deepEqual(await store.webhooks.list(), [lost])
    assert.equal(await store.webhooks.cursor(lost.endpoint.id), ZERO)
    assert.ok(
      logs.some(
        (line) =>
          line['level'] === 'error' && String(line['file']).endsWith(`${damaged.endpoint.id}.json`),
      ),
    )
    assert.ok(
      logs.some(
        (line) =>
          line['level'] === 'warn' && String(line['file']).endsWith(`${lost.endpoint.id}.cursor`),
      ),
    )
    // Left for an operator to look at.
    assert.equal(
      await readFile(path.join(dir, `${damaged.endpoint.id}.json`), 'utf8'),
      '{"endpoint":{"id":',
    )
  })
})

/** Runs the cursor writer child on `dataDir` in `mode`, until its output says `until`. */
function writer(dataDir: string, mode: 'advance' | 'set') {
  return spawnService({
    dataDir,
    args: [helperScript('webhook-cursor-writer'), dataDir, mode],
  })
}

async function waitForLine(
  child: ReturnType<typeof writer>,
  pattern: RegExp,
): Promise<RegExpExecArray> {
  const deadline = Date.now() + 20_000
  for (;;) {
    const found = pattern.exec(child.stdout())
    if (found !== null) return found
    if (child.proc.exitCode !== null || Date.now() > deadline)
      throw new Error(`the writer did not print ${String(pattern)}:\n${child.stderr()}`)
    await sleep(10)
  }
}

describe('FileStore: webhook cursors across a SIGKILL', () => {
  it('saves the cursors deliveries move within about a second, never past an acknowledgment', async (t) => {
    const dataDir = await newDataDir(t)
    const child = writer(dataDir, 'advance')
    t.after(() => child.proc.kill('SIGKILL'))
    const id = (await waitForLine(child, /^ready (\S+)$/m))[1] ?? ''
    await waitForLine(child, /^acked /m)
    await sleep(1500)
    const early = [...child.stdout().matchAll(/^acked (\S+)$/gm)].at(-1)?.[1] ?? ZERO
    // A flush each second, each a durable write: on a loaded disk it may take longer than that.
    const file = path.join(dataDir, 'webhooks', `${id}.cursor`)
    const saved = async (): Promise<string> => (await readFile(file, 'utf8')).trim()
    const deadline = Date.now() + 10_000
    while ((await saved()) < early && Date.now() < deadline) await sleep(50)
    assert.ok((await saved()) >= early, `no cursor at or past ${early} saved within 10 s`)
    child.proc.kill('SIGKILL')
    await child.exited
    const acked = [...child.stdout().matchAll(/^acked (\S+)$/gm)].map((match) => match[1] ?? '')
    const last = acked.at(-1) ?? ZERO

    const { store } = await openAt(t, dataDir)
    const cursor = (await store.webhooks.cursor(id)) ?? ''
    assert.ok(cursor <= last, `the saved cursor ${cursor} is past the last acknowledged ${last}`)
    assert.ok(
      cursor >= early,
      `the saved cursor ${cursor} is behind ${early}, saved before the kill`,
    )
  })

  it("saves a client's move of a cursor before it resolves", async (t) => {
    const dataDir = await newDataDir(t)
    const child = writer(dataDir, 'set')
    t.after(() => child.proc.kill('SIGKILL'))
    const id = (await waitForLine(child, /^ready (\S+)$/m))[1] ?? ''
    const set = (await waitForLine(child, /^set (\S+)$/m))[1]
    child.proc.kill('SIGKILL')
    await child.exited
    const { store } = await openAt(t, dataDir)
    assert.equal(await store.webhooks.cursor(id), set)
  })
})
