import assert from 'node:assert/strict'
import { once } from 'node:events'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { type AddressInfo, connect, type Socket } from 'node:net'
import { describe, it, type TestContext } from 'node:test'

import {
  isAnsweringUnfinished,
  onAnswerClosed,
  onSettled,
  whenSettled,
} from '../../src/http/request-accounting.js'

type Handler = (req: IncomingMessage, res: ServerResponse) => void

/** A real node:http server on port 0 whose requests go to `handler`, closed when the test ends. */
async function serve(t: TestContext, handler: Handler): Promise<Server> {
  const server = createServer(handler)
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.after(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => {
          resolve()
        })
      }),
  )
  return server
}

async function rawClient(server: Server): Promise<Socket> {
  const socket = connect((server.address() as AddressInfo).port, '127.0.0.1')
  await once(socket, 'connect')
  socket.on('error', () => undefined)
  socket.on('data', () => undefined)
  return socket
}

/** Sends a GET and closes the connection once the server has had time to see it. */
async function getThenLeave(server: Server): Promise<void> {
  const socket = await rawClient(server)
  socket.write(GET)
  await new Promise((resolve) => setTimeout(resolve, 50))
  socket.destroy()
}

/** Resolves once `count` values have been pushed to the returned list. */
function collector<T>(): {
  values: T[]
  push: (value: T) => void
  next: (count: number) => Promise<void>
} {
  const values: T[] = []
  const waiters: Array<() => void> = []
  return {
    values,
    push(value) {
      values.push(value)
      for (const wake of waiters.splice(0)) wake()
    },
    async next(count) {
      while (values.length < count) await new Promise<void>((resolve) => waiters.push(resolve))
    },
  }
}

const GET = 'GET / HTTP/1.1\r\nHost: x\r\n\r\n'

/** A POST whose body has 3 of its 10 bytes: its message is not whole (the parser's refusal). */
const PARTIAL_POST = 'POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc'

/**
 * Sends `text` from a raw client to a server that counts each request with onSettled and leaves
 * it unanswered; resolves with the responses once `count` requests have arrived.
 */
async function sendHeld(
  t: TestContext,
  text: string,
  count: number,
): Promise<{ responses: ServerResponse[]; socket: Socket }> {
  const arrived = collector<ServerResponse>()
  const server = await serve(t, (req, res) => {
    onSettled(req, res, () => undefined)
    arrived.push(res)
  })
  const socket = await rawClient(server)
  socket.write(text)
  await arrived.next(count)
  return { responses: arrived.values, socket }
}

describe('onSettled', () => {
  it('calls done once, with true, when the response finished', async (t) => {
    const settled = collector<boolean>()
    const responses = collector<ServerResponse>()
    const serverSockets: Socket[] = []
    const server = await serve(t, (req, res) => {
      onSettled(req, res, settled.push)
      responses.push(res)
      serverSockets.push(req.socket)
      res.end('ok')
    })
    const socket = await rawClient(server)
    socket.write(GET)
    await settled.next(1)
    // Both 'finish' and 'close' fire for a finished response, then the connection closes: still
    // one call. Listeners run in order, so once ours saw the server side's 'close', onSettled's
    // had its turn.
    const [res] = responses.values
    const [serverSocket] = serverSockets
    assert.ok(res !== undefined && serverSocket !== undefined)
    // Settled by the finish itself, not later by the keep-alive time-out closing the connection.
    assert.equal(serverSocket.destroyed, false)
    if (!res.closed) await once(res, 'close')
    // Not once(): the server's side may see ECONNRESET first, which once() takes as a rejection.
    const closed = new Promise<void>((resolve) => {
      if (serverSocket.destroyed) resolve()
      else serverSocket.once('close', () => resolve())
    })
    socket.destroy()
    await closed
    await new Promise((resolve) => setImmediate(resolve))
    assert.deepEqual(settled.values, [true])
  })

  it('does not call done while the response is still pending', async (t) => {
    const settled = collector<boolean>()
    const arrived = collector<ServerResponse>()
    const server = await serve(t, (req, res) => {
      onSettled(req, res, settled.push)
      arrived.push(res)
    })
    const socket = await rawClient(server)
    socket.write(GET)
    await arrived.next(1)
    await new Promise((resolve) => setImmediate(resolve))
    assert.deepEqual(settled.values, [])
    arrived.values[0]?.end('late')
    await settled.next(1)
    assert.deepEqual(settled.values, [true])
    socket.destroy()
  })

  it('calls done once, with false, when the client goes away before the answer', async (t) => {
    const settled = collector<boolean>()
    const arrived = collector<ServerResponse>()
    const server = await serve(t, (req, res) => {
      onSettled(req, res, settled.push)
      arrived.push(res)
    })
    const socket = await rawClient(server)
    socket.write(GET)
    await arrived.next(1)
    socket.destroy()
    await settled.next(1)
    assert.deepEqual(settled.values, [false])
  })

  it('settles every pipelined request of a connection that dies, queued ones included', async (t) => {
    const settled = collector<boolean>()
    const arrived = collector<ServerResponse>()
    const server = await serve(t, (req, res) => {
      onSettled(req, res, settled.push)
      arrived.push(res)
    })
    const socket = await rawClient(server)
    socket.write(GET + GET + GET)
    await arrived.next(3)
    socket.destroy()
    await settled.next(3)
    assert.deepEqual(settled.values, [false, false, false])
  })
})

describe('whenSettled', () => {
  it('runs once every whole request the connection carried has settled, pipelined ones included', async (t) => {
    const order = collector<string>()
    const arrived = collector<ServerResponse>()
    const server = await serve(t, (req, res) => {
      onSettled(req, res, () => order.push(`settled ${arrived.values.indexOf(res)}`))
      arrived.push(res)
    })
    const socket = await rawClient(server)
    socket.write(GET + GET)
    await arrived.next(2)
    // Both messages are whole once the parser has moved past them.
    await new Promise((resolve) => setImmediate(resolve))
    const [first, second] = arrived.values
    assert.ok(first !== undefined && second !== undefined)
    assert.ok(first.req.complete && second.req.complete)
    whenSettled(first.req.socket, () => order.push('run'))
    // The first answer is half-written: nothing has settled, nothing runs.
    first.writeHead(200, { 'content-length': '2' })
    first.write('o')
    await new Promise((resolve) => setTimeout(resolve, 50))
    assert.deepEqual(order.values, [])
    first.end('k')
    second.end('ok')
    await order.next(3)
    assert.deepEqual(order.values, ['settled 0', 'settled 1', 'run'])
  })

  it('does not wait for a request whose body is still coming: the parser refused that one', async (t) => {
    const {
      responses: [res],
    } = await sendHeld(t, PARTIAL_POST, 1)
    assert.ok(res !== undefined)
    assert.equal(res.req.complete, false)
    let ran = 0
    whenSettled(res.req.socket, () => {
      ran += 1
    })
    assert.equal(ran, 1)
    res.end()
  })

  it('waits for the earlier requests of the connection when the one refused is pipelined behind them', async (t) => {
    const {
      responses: [first, refused],
    } = await sendHeld(t, GET + PARTIAL_POST, 2)
    assert.ok(first !== undefined && refused !== undefined)
    assert.equal(refused.req.complete, false)
    const order = collector<string>()
    whenSettled(refused.req.socket, () => order.push('run'))
    await new Promise((resolve) => setTimeout(resolve, 50))
    assert.deepEqual(order.values, [], 'the GET before it is still pending')
    first.end('ok')
    await order.next(1)
    assert.deepEqual(order.values, ['run'])
    refused.end()
  })

  it('runs at once on a connection with nothing pending, and when it closes with requests pending', async (t) => {
    const accepted = collector<Socket>()
    const arrived = collector<ServerResponse>()
    const server = await serve(t, (req, res) => {
      onSettled(req, res, () => undefined)
      arrived.push(res)
    })
    server.on('connection', (socket: Socket) => {
      accepted.push(socket)
    })
    const idle = await rawClient(server)
    await accepted.next(1)
    const [idleSide] = accepted.values
    assert.ok(idleSide !== undefined)
    let ran = 0
    whenSettled(idleSide, () => {
      ran += 1
    })
    assert.equal(ran, 1)
    idle.destroy()

    const busy = await rawClient(server)
    busy.write(GET)
    await arrived.next(1)
    const [res] = arrived.values
    assert.ok(res !== undefined)
    await new Promise((resolve) => setImmediate(resolve))
    assert.equal(res.req.complete, true)
    const closed = collector<boolean>()
    whenSettled(res.req.socket, () => closed.push(true))
    await new Promise((resolve) => setTimeout(resolve, 50))
    assert.deepEqual(closed.values, [], 'waits while the request is pending')
    busy.destroy()
    await closed.next(1)
    assert.deepEqual(closed.values, [true])
  })
})

describe('onSettled on a connection already gone', () => {
  it('calls done once, with false, for a request seen after its connection closed', async (t) => {
    const settled = collector<boolean>()
    const server = await serve(t, (req, res) => {
      // Seen late, as after a wait: the connection is gone by then and will not say so again.
      req.socket.once('close', () => {
        onSettled(req, res, settled.push)
      })
    })
    await getThenLeave(server)
    await settled.next(1)
    await new Promise((resolve) => setTimeout(resolve, 50))
    assert.deepEqual(settled.values, [false])
  })
})

describe('isAnsweringUnfinished', () => {
  it('is true only while a request whose body is still coming has begun its answer', async (t) => {
    const {
      responses: [res],
      socket,
    } = await sendHeld(t, PARTIAL_POST, 1)
    assert.ok(res !== undefined)
    const side = res.req.socket
    assert.equal(isAnsweringUnfinished(side), false, 'nothing answered yet')
    res.writeHead(200, { 'content-type': 'text/plain' })
    res.flushHeaders()
    assert.equal(isAnsweringUnfinished(side), true)
    const ended = once(res.req.resume(), 'end')
    socket.write('defghij')
    await ended
    assert.equal(res.req.complete, true)
    assert.equal(isAnsweringUnfinished(side), false, 'its body is whole now')
    res.end()
  })
})

describe('onAnswerClosed', () => {
  it('runs once when the client goes away in the middle of the answer', async (t) => {
    const ran = collector<string>()
    const arrived = collector<ServerResponse>()
    const server = await serve(t, (_req, res) => {
      onAnswerClosed(res, () => ran.push('closed'))
      res.writeHead(200, { 'content-type': 'text/plain' })
      res.write('part')
      arrived.push(res)
    })
    const socket = await rawClient(server)
    socket.write(GET)
    await arrived.next(1)
    await new Promise((resolve) => setTimeout(resolve, 50))
    assert.deepEqual(ran.values, [], 'not while the answer goes on')
    socket.destroy()
    await ran.next(1)
    // The response's close and its socket's both came: still one run.
    await new Promise((resolve) => setTimeout(resolve, 50))
    assert.deepEqual(ran.values, ['closed'])
  })

  it('runs once, and not at once, when the answer ends whole', async (t) => {
    const ran = collector<string>()
    const server = await serve(t, (_req, res) => {
      onAnswerClosed(res, () => ran.push('closed'))
      assert.deepEqual(ran.values, [])
      res.end('ok')
    })
    const socket = await rawClient(server)
    socket.write(GET)
    await ran.next(1)
    // On a connection kept open: the answer's own close, not its connection's.
    assert.equal(socket.destroyed, false)
    socket.destroy()
    await new Promise((resolve) => setTimeout(resolve, 50))
    assert.deepEqual(ran.values, ['closed'])
  })

  it('runs once for a pipelined answer still queued when its connection died (its response never closes on Node 20)', async (t) => {
    const arrived = collector<ServerResponse>()
    const server = await serve(t, (_req, res) => {
      arrived.push(res)
    })
    const socket = await rawClient(server)
    socket.write(GET + GET)
    await arrived.next(2)
    const queued = arrived.values[1]
    assert.ok(queued !== undefined)
    const gone = once(queued.req.socket, 'close')
    socket.destroy()
    await gone
    const ran = collector<string>()
    onAnswerClosed(queued, () => ran.push('closed'))
    // Its connection will not close again: the run is queued now, or never.
    await new Promise((resolve) => setTimeout(resolve, 50))
    assert.deepEqual(ran.values, ['closed'])
  })

  it('runs once for an answer whose connection was gone before it was asked', async (t) => {
    const ran = collector<string>()
    const server = await serve(t, (req, res) => {
      req.socket.once('close', () => {
        let now = true
        onAnswerClosed(res, () => ran.push(now ? 'in the same turn' : 'later'))
        now = false
      })
    })
    await getThenLeave(server)
    await ran.next(1)
    await new Promise((resolve) => setTimeout(resolve, 50))
    assert.deepEqual(ran.values, ['later'])
  })
})
