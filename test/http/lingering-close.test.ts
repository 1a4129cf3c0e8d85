import assert from 'node:assert/strict'
import { once } from 'node:events'
import { IncomingMessage } from 'node:http'
import { connect, createServer, Socket } from 'node:net'
import { describe, it, type TestContext } from 'node:test'

import {
  closeInStages,
  isBehindLastRequest,
  isClosing,
  isLastRequest,
  serveNoneAfter,
} from '../../src/http/lingering-close.js'

/**
 * A real TCP connection on loopback: the server's end (half-open allowed, as node:http has it)
 * and the client's, which keeps its side open after the server's FIN unless it ends it.
 */
async function connection(t: TestContext): Promise<{ server: Socket; client: Socket }> {
  const listener = createServer({ allowHalfOpen: true })
  listener.listen(0, '127.0.0.1')
  await once(listener, 'listening')
  const address = listener.address()
  assert.ok(address !== null && typeof address === 'object')
  const accepted = once(listener, 'connection') as Promise<[Socket]>
  const client = connect({ port: address.port, host: '127.0.0.1', allowHalfOpen: true })
  client.on('error', () => undefined)
  const [server] = await accepted
  t.after(() => {
    client.destroy()
    server.destroy()
    listener.close()
  })
  return { server, client }
}

/** Resolves once the server's end has read `total` bytes in all. */
function whenRead(server: Socket, total: number): Promise<void> {
  return new Promise((resolve) => {
    const check = (): void => {
      if (server.bytesRead < total) return
      server.off('data', check)
      resolve()
    }
    server.on('data', check)
    check()
  })
}

describe('closeInStages', () => {
  it('half-closes, reads on up to its byte bound counted from the call, and closes past it', async (t) => {
    const { server, client } = await connection(t)
    // Bytes read before the call do not count against the bound.
    const early = whenRead(server, 300)
    client.write(Buffer.alloc(300))
    await early
    closeInStages(server, { ms: 60_000, bytes: 1000 })
    assert.equal(isClosing(server), true)
    await once(client, 'end')

    const atBound = whenRead(server, 1300)
    client.write(Buffer.alloc(1000))
    await atBound
    assert.equal(server.destroyed, false, 'closed at exactly the bound, not past it')

    client.write(Buffer.alloc(1))
    await once(server, 'close')
    assert.equal(server.bytesRead, 1301)
  })

  it('closes at once when the client ends its side, long before its time bound', {
    timeout: 10_000,
  }, async (t) => {
    const { server, client } = await connection(t)
    closeInStages(server, { ms: 60_000, bytes: 1000 })
    await once(client, 'end')
    client.end()
    await once(server, 'close')
    assert.equal(server.destroyed, true)
  })

  it('closes at its time bound a client that neither sends nor ends', async (t) => {
    const { server, client } = await connection(t)
    closeInStages(server, { ms: 50, bytes: 1000 })
    await once(client, 'end')
    await once(server, 'close')
    assert.equal(client.writableEnded, false, 'the client never ended its side')
  })

  it('does nothing the second time, nor on a socket already destroyed', async (t) => {
    const { server } = await connection(t)
    closeInStages(server, { ms: 60_000, bytes: 1000 })
    const listeners = server.listenerCount('data')
    closeInStages(server, { ms: 60_000, bytes: 1000 })
    assert.equal(server.listenerCount('data'), listeners)

    const other = await connection(t)
    other.server.destroy()
    closeInStages(other.server)
    assert.equal(isClosing(other.server), false)
    assert.equal(other.server.listenerCount('data'), 0)
  })
})

describe('serveNoneAfter', () => {
  it('makes a request the last its connection serves: any other on that connection comes behind it', () => {
    const socket = new Socket()
    const last = new IncomingMessage(socket)
    const next = new IncomingMessage(socket)
    const elsewhere = new IncomingMessage(new Socket())
    assert.deepEqual([isLastRequest(last), isBehindLastRequest(next)], [false, false])
    serveNoneAfter(last)
    assert.deepEqual([isLastRequest(last), isBehindLastRequest(last)], [true, false])
    assert.deepEqual([isLastRequest(next), isBehindLastRequest(next)], [false, true])
    assert.deepEqual([isLastRequest(elsewhere), isBehindLastRequest(elsewhere)], [false, false])
  })
})
