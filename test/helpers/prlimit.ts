import { execFileSync } from 'node:child_process'

/**
 * Why a test that sets a process's descriptor limit with util-linux's prlimit cannot run here;
 * undefined when it can (Linux, prlimit installed).
 */
export function prlimitMissing(): string | undefined {
  if (process.platform !== 'linux') return 'descriptor limits are set with prlimit, on Linux'
  try {
    execFileSync('prlimit', ['--version'], { stdio: 'ignore' })
    return undefined
  } catch {
    return 'no prlimit (util-linux) on this machine'
  }
}
