/** A request body holds about its own bytes, however small the pieces it came in. */
import assert from 'node:assert/strict'
import { connect, type Socket } from 'node:net'
import { describe, it } from 'node:test'

import { sleep } from '../helpers/child.js'
import { startMeasuredChild } from '../helpers/measured-child.js'
import { readRssMb, sampleRss } from '../helpers/proc-stats.js'
import { makeToken } from '../helpers/tokens.js'

const token = makeToken()

describe('bodies of 64,000 bytes sent a byte at a time on 20 connections', () => {
  it('hold about their bytes while they arrive, not a Buffer per byte', {
    timeout: 120_000,
  }, async (t) => {
    const { child, pid } = await startMeasuredChild(t)
    const { hostname, port } = new URL(child.url)
    const length = 64_000
    const sockets: Socket[] = []
    for (let i = 0; i < 20; i += 1) {
      const socket = connect(Number(port), hostname)
      socket.on('error', () => undefined)
      socket.setNoDelay(true)
      socket.resume()
      socket.write(
        `POST /users HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${token}\r\ncontent-type: application/json\r\ncontent-length: ${length}\r\n\r\n`,
      )
      sockets.push(socket)
    }
    t.after(() => {
      for (const socket of sockets) socket.destroy()
    })
    await sleep(500)
    const before = readRssMb(pid)
    const rss = sampleRss(pid)
    const space = Buffer.from(' ')
    // All but the last byte: the bodies are still being read, held as they arrived.
    for (let i = 0; i < length - 1; i += 1) {
      for (const socket of sockets) socket.write(space)
      if (i % 200 === 0) await sleep(1)
    }
    await sleep(1000)
    const growth = rss.stop() - before
    t.diagnostic(`RSS grew ${Math.round(growth)} MB for 20 bodies of ${length} bytes`)
    // One Buffer per byte is some 17 MB a body, 340 MB in all; copied, it is 1.3 MB.
    assert.ok(growth < 100, `RSS grew ${Math.round(growth)} MB for 20 bodies of ${length} bytes`)
  })
})
