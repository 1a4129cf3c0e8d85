import assert from 'node:assert/strict'
import { createServer } from 'node:http'
import { type AddressInfo, connect } from 'node:net'
import { describe, it } from 'node:test'

import { ImportRun } from '../../src/bulk/import-run.js'

describe('ImportRun', () => {
  it('ends at once when its client left before it started (it never ended, holding the import)', async (t) => {
    let ended: (outcome: string) => void = () => undefined
    const outcome = new Promise<string>((resolve) => {
      ended = resolve
    })
    // The run starts only once the connection is gone, as after a wait for the import's slot.
    const server = createServer((req, res) => {
      req.socket.once('close', async () => {
        await new Promise((resolve) => setTimeout(resolve, 20))
        const run = new ImportRun({
          req,
          res,
          importLine: () => Promise.resolve({ line: 1, status: 201 }),
          maxBytes: 1024,
          readAheadBytes: 1024,
          concurrency: 1,
          outputBytes: 1024,
          stallMs: 60_000,
          batch: 10,
        })
        run.run().then(
          () => ended('ended'),
          (error: unknown) => ended(String(error)),
        )
      })
    })
    await new Promise<void>((resolve) => {
      server.listen(0, '127.0.0.1', resolve)
    })
    t.after(() => {
      server.closeAllConnections()
      server.close()
    })
    const socket = connect((server.address() as AddressInfo).port, '127.0.0.1')
    socket.on('error', () => undefined)
    const line = '{"email":"a@example.com","name":"A"}\n'
    socket.write(
      `POST /users:import HTTP/1.1\r\nhost: x\r\ncontent-type: application/x-ndjson\r\ncontent-length: ${line.length}\r\n\r\n${line}`,
      () => {
        setTimeout(() => socket.destroy(), 50)
      },
    )
    const late = new Promise<string>((resolve) => setTimeout(() => resolve('never ended'), 2000))
    assert.equal(await Promise.race([outcome, late]), 'ended')
  })
})
