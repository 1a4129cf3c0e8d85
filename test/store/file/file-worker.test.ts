import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { readdir, readFile, stat } from 'node:fs/promises'
import path from 'node:path'
import { describe, it } from 'node:test'

import { FileWorker } from '../../../src/store/file/file-worker.js'
import { makeTempDir } from '../../helpers/service.js'

const WORKER_MODULE = path.join(
  import.meta.dirname,
  '..',
  '..',
  '..',
  'src',
  'store',
  'file',
  'file-worker.ts',
)

function started(t: { after: (fn: () => Promise<void>) => void }): FileWorker {
  const files = new FileWorker()
  files.start()
  t.after(() => files.close())
  return files
}

describe('FileWorker', () => {
  it('writes new files (mode 0600), renames and unlinks, in the order given within a turn', async (t) => {
    const dir = await makeTempDir(t)
    const files = started(t)
    const temp = path.join(dir, '.a.tmp')
    const target = path.join(dir, 'a.json')
    // One turn: the three calls go in one message and are made in order.
    await Promise.all([
      files.run({ call: 'write', path: temp, data: '{"a":1}' }),
      files.run({ call: 'rename', path: temp, to: target }),
      files.run({ call: 'write', path: path.join(dir, 'b.json'), data: 'b' }),
    ])
    assert.equal(await readFile(target, 'utf8'), '{"a":1}')
    assert.equal((await stat(target)).mode & 0o777, 0o600)
    await files.run({ call: 'unlink', path: path.join(dir, 'b.json') })
    assert.deepEqual(await readdir(dir), ['a.json'])
  })

  it("rejects a failed call with node:fs's code and syscall, and makes the calls after it", async (t) => {
    const dir = await makeTempDir(t)
    const files = started(t)
    const taken = path.join(dir, 'taken.json')
    await files.run({ call: 'write', path: taken, data: 'first' })
    const results = await Promise.allSettled([
      files.run({ call: 'write', path: taken, data: 'second' }),
      files.run({ call: 'rename', path: path.join(dir, 'missing'), to: taken }),
      files.run({ call: 'write', path: path.join(dir, 'after.json'), data: 'after' }),
    ])
    assert.deepEqual(
      results.map((result) =>
        result.status === 'rejected'
          ? {
              code: (result.reason as { code?: unknown }).code,
              syscall: (result.reason as { syscall?: unknown }).syscall,
            }
          : 'ok',
      ),
      [{ code: 'EEXIST', syscall: 'open' }, { code: 'ENOENT', syscall: 'rename' }, 'ok'],
    )
    // The exclusive write never replaced the file.
    assert.equal(await readFile(taken, 'utf8'), 'first')
    assert.equal(await readFile(path.join(dir, 'after.json'), 'utf8'), 'after')
  })

  it('rejects the calls still out when its thread stops, and starts a new thread for the next ones', async (t) => {
    const dir = await makeTempDir(t)
    const files = new FileWorker()
    t.after(() => files.close())
    const out = files.run({
      call: 'write',
      path: path.join(dir, 'x.json'),
      data: 'x'.repeat(1 << 20),
    })
    await new Promise<void>((resolve) => {
      setImmediate(resolve)
    })
    await files.close()
    await assert.rejects(out, /the file worker stopped/)
    await files.run({ call: 'write', path: path.join(dir, 'y.json'), data: 'y' })
    assert.equal(await readFile(path.join(dir, 'y.json'), 'utf8'), 'y')
  })

  it('never keeps the process alive once its calls are answered', {
    timeout: 30_000,
  }, async (t) => {
    const dir = await makeTempDir(t)
    const program = `
      import { FileWorker } from ${JSON.stringify(WORKER_MODULE)}
      const files = new FileWorker()
      files.start()
      await files.run({ call: 'write', path: ${JSON.stringify(path.join(dir, 'z.json'))}, data: 'z' })
      console.log('written')`
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', '--input-type=module', '-e', program],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    )
    let output = ''
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString()
    })
    const exit = await new Promise<number | null>((resolve) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL')
      }, 20_000)
      child.on('exit', (code) => {
        clearTimeout(timer)
        resolve(code)
      })
    })
    assert.equal(output.trim(), 'written', 'the call was answered before the process ended')
    assert.equal(exit, 0, 'the process ended by itself')
    assert.equal(await readFile(path.join(dir, 'z.json'), 'utf8'), 'z')
  })
})
