/**
 * `user-service export` and `user-service import`: the operator's side of the bulk routes (docs/bulk.md), talking to a running
 * service. Both stream (stdout, stdin) and count on stderr, so a million users never sit in memory.
 */
import { request as httpRequest, type IncomingMessage } from 'node:http'
import { request as httpsRequest } from 'node:https'

import { BULK_USAGE } from './cli-usage.js'

interface Target {
  readonly url: URL
  readonly token: string
}

/** Runs one command; resolves with the exit code (0 all done, 1 failed, 3 some lines refused). */
export async function runBulkCli(
  command: 'export' | 'import',
  args: readonly string[],
  io: {
    stdin: NodeJS.ReadableStream
    stdout: NodeJS.WritableStream
    stderr: NodeJS.WritableStream
    env: NodeJS.ProcessEnv
  },
): Promise<number> {
  const target = parseTarget(args, io.env)
  if (typeof target === 'string') {
    io.stderr.write(`user-service ${command}: ${target}\n${BULK_USAGE}`)
    return 2
  }
  const path = command === 'export' ? './users:export' : './users:import'
  const url = new URL(path, target.url.href.endsWith('/') ? target.url : `${target.url.href}/`)
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest
  return new Promise((resolve) => {
    let failed = false
    const fail = (message: string): void => {
      if (failed) return
      failed = true
      io.stderr.write(`\nuser-service ${command}: ${message}\n`)
      resolve(1)
    }
    // A reader that went away (`| head -1`) ends the command with one line, not an EPIPE's stack.
    io.stdout.on('error', (error: NodeJS.ErrnoException) => {
      fail(`stdout was closed (${error.code ?? error.message})`)
      req.destroy()
    })
    const req = send(
      url,
      {
        method: command === 'export' ? 'GET' : 'POST',
        headers: {
          authorization: `Bearer ${target.token}`,
          ...(command === 'import' ? { 'content-type': 'application/x-ndjson' } : {}),
        },
      },
      (res) => {
        if (res.statusCode !== 200) {
          void readAll(res).then((text) => {
            fail(`${res.statusCode ?? 0} ${text.trim()}`)
          })
          return
        }
        void (command === 'export' ? pipeExport(res, io) : pipeResults(res, io)).then(
          resolve,
          (error: unknown) => {
            fail(error instanceof Error ? error.message : String(error))
          },
        )
      },
    )
    req.on('error', (error) => {
      fail(error.message)
    })
    if (command === 'export') req.end()
    else io.stdin.pipe(req)
  })
}

function parseTarget(args: readonly string[], env: NodeJS.ProcessEnv): Target | string {
  let url = env['USER_SERVICE_URL']
  let token = env['USER_SERVICE_TOKEN']
  for (let i = 0; i < args.length; i += 1) {
    const value = args[i + 1]
    if (args[i] === '--url' && value !== undefined) url = value
    else if (args[i] === '--token' && value !== undefined) token = value
    else return `unknown or incomplete option "${args[i] ?? ''}"`
    i += 1
  }
  if (url === undefined || url === '') return 'no service URL: give --url or USER_SERVICE_URL'
  if (token === undefined || token === '')
    return 'no token: give --token or USER_SERVICE_TOKEN (scope users:admin)'
  try {
    return { url: new URL(url), token }
  } catch {
    return `"${url}" is not a URL`
  }
}

/** Copies the export to stdout as it comes (honouring stdout's backpressure), counting lines. */
async function pipeExport(
  res: IncomingMessage,
  io: { stdout: NodeJS.WritableStream; stderr: NodeJS.WritableStream },
): Promise<number> {
  let users = 0
  let complete = false
  res.on('end', () => {
    complete = true
  })
  for await (const chunk of res as AsyncIterable<Buffer>) {
    for (let at = chunk.indexOf(10); at !== -1; at = chunk.indexOf(10, at + 1)) users += 1
    if (!io.stdout.write(chunk)) await new Promise((resolve) => io.stdout.once('drain', resolve))
    if (users % 10_000 < 500) io.stderr.write(`\rexported ${users} users`)
  }
  if (!complete || !res.complete) throw new Error(`the export was cut short after ${users} users`)
  io.stderr.write(`\rexported ${users} users\n`)
  return 0
}

/** Copies the results to stdout and counts them by status; 3 when any line was refused. */
async function pipeResults(
  res: IncomingMessage,
  io: { stdout: NodeJS.WritableStream; stderr: NodeJS.WritableStream },
): Promise<number> {
  const counts = new Map<number, number>()
  let rest = ''
  const report = (): string =>
    [...counts]
      .sort(([a], [b]) => a - b)
      .map(([status, count]) => `${status}: ${count}`)
      .join(', ')
  for await (const chunk of res as AsyncIterable<Buffer>) {
    if (!io.stdout.write(chunk)) await new Promise((resolve) => io.stdout.once('drain', resolve))
    const text = rest + chunk.toString('utf8')
    const lines = text.split('\n')
    rest = lines.pop() ?? ''
    for (const line of lines) {
      const status = (JSON.parse(line) as { status?: number }).status ?? 0
      counts.set(status, (counts.get(status) ?? 0) + 1)
    }
    io.stderr.write(`\rimported lines (by status) ${report()}`)
  }
  io.stderr.write(`\rimported lines (by status) ${report()}\n`)
  if (!res.complete) throw new Error('the import was cut short')
  return [...counts.keys()].every((status) => status === 200 || status === 201) ? 0 : 3
}

function readAll(res: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = []
    res.on('data', (chunk: Buffer) => chunks.push(chunk))
    res.on('end', () => {
      resolve(Buffer.concat(chunks).toString('utf8'))
    })
    res.on('error', () => {
      resolve(Buffer.concat(chunks).toString('utf8'))
    })
  })
}
