import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { readdirSync } from 'node:fs'
import type { Socket } from 'node:net'
import { describe, it } from 'node:test'

import { LOADED_LINE, sleep, startChild, waitForOutput } from '../helpers/child.js'
import { request } from '../helpers/http.js'
import { tryRequest, waitFor } from '../helpers/ops.js'
import { prlimitMissing } from '../helpers/prlimit.js'
import { openSocket } from '../helpers/raw-exchange.js'
import { makeTempDir, uniqueEmail } from '../helpers/service.js'
import { makeToken } from '../helpers/tokens.js'

const token = makeToken()

describe('a process out of file descriptors for a moment', { skip: prlimitMissing() }, () => {
  it('keeps taking writes once idle connections that used up its descriptors are gone', {
    timeout: 60_000,
  }, async (t) => {
    const dataDir = await makeTempDir(t)
    const child = await startChild({ dataDir })
    t.after(() => child.stop('SIGKILL'))
    await waitForOutput(child, LOADED_LINE)
    const pid = child.proc.pid ?? 0
    // A limit below MAX_CONNECTIONS (10,000 by default), as a container or a service manager may
    // set: idle connections of a client without a token use the descriptors up.
    const limit = readdirSync(`/proc/${pid}/fd`).length + 40
    execFileSync('prlimit', [`--pid=${pid}`, `--nofile=${limit}:${limit}`])

    const sockets: Socket[] = []
    const opened = await Promise.allSettled(
      Array.from({ length: limit + 40 }, () => openSocket(child.url)),
    )
    for (const result of opened) {
      if (result.status === 'fulfilled') {
        result.value.on('error', () => undefined)
        sockets.push(result.value)
      }
    }
    // The data directory's watchdog runs every second: it ran while no descriptor was left.
    await sleep(2500)
    for (const socket of sockets) socket.destroy()
    await waitFor('descriptors to be given back', () =>
      readdirSync(`/proc/${pid}/fd`).length < limit - 20 ? true : undefined,
    )

    const created = await request('POST', `${child.url}/users`, {
      token,
      json: { email: uniqueEmail(), name: 'After the storm' },
    })
    assert.equal(created.status, 201, created.text)
    const ready = await tryRequest('GET', `${child.url}/readyz`)
    assert.ok('status' in ready && ready.status === 200, JSON.stringify(ready))
    assert.doesNotMatch(child.stdout(), /turned read-only/)
  })
})
