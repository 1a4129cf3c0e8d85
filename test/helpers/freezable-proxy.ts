import net from 'node:net'
import type { TestContext } from 'node:test'

/**
 * A TCP forwarder between the service and PostgreSQL that can stop forwarding without closing a
 * socket: to the service, the database stops answering as a frozen server or a network partition
 * does (its connections stay open and nothing comes back). Only this proxy's connections freeze,
 * never anyone else's on a shared test cluster. Closed when the test ends.
 */
export interface FreezableProxy {
  /** `url` with the proxy's host and port in place of the database's. */
  readonly url: string
  /** Stops reading from both sides of every connection, present and future. */
  freeze(): void
  /** Forwards again, what was held back first. */
  thaw(): void
}

export async function startFreezableProxy(t: TestContext, url: string): Promise<FreezableProxy> {
  const target = new URL(url)
  const sockets = new Set<net.Socket>()
  let frozen = false
  const track = (socket: net.Socket): void => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    if (frozen) socket.pause()
  }
  const forward = (from: net.Socket, to: net.Socket): void => {
    from.on('data', (chunk) => {
      if (!to.write(chunk)) from.pause()
    })
    to.on('drain', () => {
      if (!frozen) from.resume()
    })
    from.on('end', () => to.end())
    from.on('error', () => to.destroy())
    from.on('close', () => to.destroy())
  }
  const server = net.createServer((client) => {
    const upstream = net.connect({ host: target.hostname, port: Number(target.port || 5432) })
    track(client)
    track(upstream)
    forward(client, upstream)
    forward(upstream, client)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(async () => {
    for (const socket of sockets) socket.destroy()
    await new Promise((resolve) => server.close(resolve))
  })
  const address = server.address() as net.AddressInfo
  const proxied = new URL(url)
  proxied.hostname = '127.0.0.1'
  proxied.port = String(address.port)
  return {
    url: proxied.toString(),
    freeze() {
      frozen = true
      for (const socket of sockets) socket.pause()
    },
    thaw() {
      frozen = false
      for (const socket of sockets) socket.resume()
    },
  }
}
