import { execFileSync } from 'node:child_process'
import { closeSync, mkdirSync, openSync, rmSync, writeSync } from 'node:fs'
import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import type { TestContext } from 'node:test'

import { sleep } from './child.js'

export type Later = (step: () => unknown) => void

/** Runs clean-up steps once the test ends, last registered first (stop children before unmounting). */
export function cleanups(t: TestContext): Later {
  const steps: (() => unknown)[] = []
  t.after(async () => {
    for (const step of steps.reverse()) {
      try {
        await step()
      } catch {
        // Keep cleaning: one failed step must not leave a mount or a process behind.
      }
    }
  })
  return (step) => {
    steps.push(step)
  }
}

/** A temp directory removed after the test, and where the data directory goes in it. */
export async function makeWorld(
  t: TestContext,
  prefix = 'storage-faults-',
): Promise<{ root: string; dataDir: string; later: Later }> {
  const later = cleanups(t)
  const root = await mkdtemp(path.join(tmpdir(), prefix))
  later(() => {
    rmSync(root, { recursive: true, force: true })
  })
  return { root, dataDir: path.join(root, 'data'), later }
}

/** A world whose data directory is on a small tmpfs of its own, or why not (the test skips). */
export async function tmpfsWorld(
  t: TestContext,
): Promise<{ mount: string; dataDir: string; later: Later } | string> {
  const { root, later } = await makeWorld(t)
  const mount = path.join(root, 'mnt')
  const refused = mountTmpfs(mount, later)
  return refused ?? { mount, dataDir: path.join(mount, 'data'), later }
}

/** Mounts a small tmpfs at `dir`; undefined when it worked, else why not (the test skips). */
function mountTmpfs(dir: string, later: Later): string | undefined {
  mkdirSync(dir, { recursive: true })
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m,mode=0700', 'tmpfs', dir], {
      stdio: 'pipe',
    })
  } catch (error) {
    const why = (error as { stderr?: Buffer }).stderr?.toString().trim() ?? String(error)
    return `mounting a tmpfs is not allowed here (${why || 'mount failed'})`
  }
  later(() => {
    execFileSync('umount', ['-l', dir], { stdio: 'ignore' })
  })
  return undefined
}

/**
 * Remounts the tmpfs at `dir` read-only. The kernel refuses that ("mount point is busy") while a
 * file on it is open for writing, as a running service's checkpoint holds one for a moment every
 * second (longer on a loaded machine): the remount is tried again until it goes through.
 */
export async function remountReadOnly(dir: string): Promise<void> {
  const deadline = Date.now() + 10_000
  for (;;) {
    try {
      execFileSync('mount', ['-o', 'remount,ro', dir], { stdio: 'pipe' })
      return
    } catch (error) {
      if (!/busy/.test(String(error)) || Date.now() > deadline) throw error
    }
    await sleep(20)
  }
}

/** Writes into `file` until the file system has no space left. */
export function fillDisk(file: string): void {
  const fd = openSync(file, 'w')
  try {
    for (const size of [64 * 1024, 4096, 1]) {
      const chunk = Buffer.alloc(size, 120)
      for (;;) {
        try {
          if (writeSync(fd, chunk) < size) break
        } catch (error) {
          if ((error as { code?: unknown }).code === 'ENOSPC') break
          throw error
        }
      }
    }
  } finally {
    closeSync(fd)
  }
}
