/**
 * `user-service healthcheck`: exit 0 when the service in this container answers 200 on /healthz,
 * else exit 1 with one line on stderr. The binary image has no shell, curl or node, so its
 * HEALTHCHECK runs the executable itself; the port and host come from the same variables as the
 * service's, so a container started with another PORT is still probed where it listens.
 */
import { request } from 'node:http'

import { parseConfig } from './config.js'

/** Below the engines' usual health-check timeout (3 s in the Dockerfile). */
const TIMEOUT_MS = 2000

/** The address to probe: a wildcard bind is reached on loopback. */
function probeHost(host: string): string {
  if (host === '0.0.0.0') return '127.0.0.1'
  if (host === '::') return '::1'
  return host
}

/** Resolves with the exit code; never rejects. */
export async function runHealthcheck(
  env: NodeJS.ProcessEnv,
  stderr: NodeJS.WritableStream,
): Promise<number> {
  let host: string
  let port: number
  try {
    const config = parseConfig(env)
    host = probeHost(config.host)
    port = config.port
  } catch (error) {
    stderr.write(`healthcheck: ${error instanceof Error ? error.message : String(error)}\n`)
    return 1
  }
  if (port === 0) {
    stderr.write('healthcheck: PORT=0 picks a free port at start; set PORT to probe it\n')
    return 1
  }
  return new Promise((resolve) => {
    const req = request({ host, port, path: '/healthz', timeout: TIMEOUT_MS }, (res) => {
      res.resume()
      if (res.statusCode === 200) {
        resolve(0)
        return
      }
      stderr.write(
        `healthcheck: GET /healthz on ${host}:${port} answered ${res.statusCode ?? 'nothing'}\n`,
      )
      resolve(1)
    })
    req.on('timeout', () => {
      req.destroy(new Error(`no answer within ${TIMEOUT_MS} ms`))
    })
    req.on('error', (error) => {
      stderr.write(`healthcheck: GET /healthz on ${host}:${port} failed: ${error.message}\n`)
      resolve(1)
    })
    req.end()
  })
}
