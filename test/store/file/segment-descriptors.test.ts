import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { closeSync, openSync, readdirSync, readFileSync } from 'node:fs'
import { describe, it } from 'node:test'

import { hasCode } from '../../../src/store/file/errno.js'
import { FileStore } from '../../../src/store/file/file-store.js'
import { sleep } from '../../helpers/child.js'
import { prlimitMissing } from '../../helpers/prlimit.js'
import { makeTempDir } from '../../helpers/service.js'
import { makeUser } from '../../helpers/store-users.js'

/** This process's soft and hard limits on open files. */
function descriptorLimits(): [string, string] {
  const line = readFileSync('/proc/self/limits', 'utf8')
    .split('\n')
    .find((text) => text.startsWith('Max open files'))
  const [soft, hard] = line?.split(/\s{2,}/).slice(1, 3) ?? []
  assert.ok(soft !== undefined && hard !== undefined, `no open files limit in ${line}`)
  return [soft, hard]
}

/** Opens /dev/null until no descriptor is left, then gives one back: the next open takes the last. */
function useDescriptorsButOne(): number[] {
  const held: number[] = []
  for (;;) {
    try {
      held.push(openSync('/dev/null', 'r'))
    } catch (error) {
      assert.ok(hasCode(error, 'EMFILE'), String(error))
      break
    }
  }
  const last = held.pop()
  if (last !== undefined) closeSync(last)
  return held
}

describe('a new event log segment when the process is short of descriptors', {
  skip: prlimitMissing(),
}, () => {
  it('refuses that write only: the directory that could not be opened was not a failed fsync', async (t) => {
    const dataDir = await makeTempDir(t)
    let clock = Date.now()
    const store = new FileStore({ dataDir, now: () => clock })
    await store.open()
    t.after(() => store.close())
    await store.create(makeUser())
    // The checkpoint's background work on the first user's file, done before descriptors run out.
    await sleep(1500)
    // The segment is now older than an hour: the next append starts a new one, which opens its
    // file (the last descriptor) and then the directory, to make the new name durable.
    clock += 2 * 3_600_000
    const [soft, hard] = descriptorLimits()
    const pid = String(process.pid)
    const open = readdirSync('/proc/self/fd').length
    execFileSync('prlimit', [`--pid=${pid}`, `--nofile=${open + 32}:${hard}`])
    let held: number[] = []
    try {
      held = useDescriptorsButOne()
      await assert.rejects(store.create(makeUser()))
    } finally {
      for (const fd of held) closeSync(fd)
      execFileSync('prlimit', [`--pid=${pid}`, `--nofile=${soft}:${hard}`])
    }
    const created = await store.create(makeUser())
    assert.equal(created.user.version, 1)
    assert.equal(store.health().state, 'ok', JSON.stringify(store.health()))
  })
})
