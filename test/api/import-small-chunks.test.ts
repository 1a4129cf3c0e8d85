/** An import's read-ahead is bounded by what it holds, however small the pieces its body came in. */
import assert from 'node:assert/strict'
import { connect, type Socket } from 'node:net'
import { describe, it, type TestContext } from 'node:test'

import { sleep } from '../helpers/child.js'
import { startMeasuredChild } from '../helpers/measured-child.js'
import { readRssMb, sampleRss } from '../helpers/proc-stats.js'
import { makeToken } from '../helpers/tokens.js'

const token = makeToken()
const MiB = 1024 * 1024

/** A raw connection to `url` that has sent the head of an import of `length` bytes. */
function importSocket(t: TestContext, url: string, length: number): Socket {
  const { hostname, port } = new URL(url)
  const socket = connect(Number(port), hostname)
  t.after(() => {
    socket.destroy()
  })
  socket.on('error', () => undefined)
  socket.setNoDelay(true)
  socket.write(
    `POST /users:import HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${token}\r\ncontent-type: application/x-ndjson\r\ncontent-length: ${length}\r\n\r\n`,
  )
  return socket
}

describe('an import whose body arrives a byte at a time while its results are not read', () => {
  it('stops reading it long before its memory passes the read-ahead many times over', {
    timeout: 120_000,
  }, async (t) => {
    const { child, pid } = await startMeasuredChild(t)
    const bytes = 8 * MiB
    // Lines refused at once fill the results held for a client that does not read them: the
    // run waits, and what arrives meanwhile is only read ahead.
    const filler = Buffer.alloc(800_000, 'x\n')
    const socket = importSocket(t, child.url, filler.length + bytes)
    socket.pause()
    socket.write(filler)
    await sleep(1500)
    const before = readRssMb(pid)
    const rss = sampleRss(pid)
    const one = Buffer.from('a')
    let sent = 0
    for (const until = Date.now() + 20_000; sent < bytes && Date.now() < until; ) {
      sent += 1
      if (!socket.write(one)) {
        // The service stopped reading: the kernel's buffers are full.
        const drained = await Promise.race([
          new Promise<boolean>((resolve) => socket.once('drain', () => resolve(true))),
          sleep(1000).then(() => false),
        ])
        if (!drained) break
      }
      if (sent % 1000 === 0) await new Promise((resolve) => setImmediate(resolve))
    }
    await sleep(500)
    const growth = rss.stop() - before
    t.diagnostic(`${sent} bytes sent one at a time; RSS grew ${Math.round(growth)} MB`)
    // 8 MiB held as one Buffer per byte is some 220 MB.
    assert.ok(growth < 80, `RSS grew ${Math.round(growth)} MB for ${sent} bytes read ahead`)
  })

  it('holds a long line sent a byte at a time as one buffer, not as a Buffer per byte', {
    timeout: 120_000,
  }, async (t) => {
    // A small young generation: V8 collects the pieces it no longer needs as it goes.
    const { child, pid } = await startMeasuredChild(t, { heapMb: 64 })
    // Near the longest line taken (128 KiB), with no newline yet: the line is still gathered.
    const bytes = 120 * 1024
    const socket = importSocket(t, child.url, bytes + 1)
    await sleep(500)
    const before = readRssMb(pid)
    const rss = sampleRss(pid)
    const one = Buffer.from('a')
    for (let sent = 0; sent < bytes; sent += 1) {
      socket.write(one)
      // A turn of the loop every few bytes: they leave as separate segments, read one at a time.
      if (sent % 16 === 0) await new Promise((resolve) => setImmediate(resolve))
    }
    await sleep(1000)
    const growth = rss.stop() - before
    t.diagnostic(`${bytes} bytes of one line sent one at a time; RSS grew ${Math.round(growth)} MB`)
    // A Buffer per byte grew it by 12 to 16 MB on Node 20, one buffer by 1. Later Nodes grow their
    // committed heap toward the cap before collecting (3 to 4 MB, and 7 for a Buffer per byte, on
    // Node 26): there the bound only catches worse.
    const bound = process.versions.node.startsWith('20.') ? 6 : 12
    assert.ok(growth < bound, `RSS grew ${Math.round(growth)} MB for a line of ${bytes} bytes`)
  })
})
