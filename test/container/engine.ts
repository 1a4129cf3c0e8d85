/**
 * The container engine as the container test and the container benchmark use it: podman, else
 * docker, driven through its command line (what a user types), with the flags where the two differ.
 */
import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { copyFile, mkdir, readFile, rm } from 'node:fs/promises'
import path from 'node:path'

import { PROJECT_ROOT } from '../helpers/child.js'

export type EngineName = 'podman' | 'docker'

export interface Outcome {
  /** The exit code; null when it was killed (time-out). */
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** The two images of the Dockerfile: the default target (Node and one file) and `binary`. */
export const TARGETS = [
  { name: 'app', target: undefined },
  { name: 'binary', target: 'binary' },
] as const

export type Target = (typeof TARGETS)[number]

export class Engine {
  readonly name: EngineName

  constructor(name: EngineName) {
    this.name = name
  }

  /** Runs `<engine> args…`; resolves with what it said, never rejects. */
  run(args: readonly string[], timeoutMs = 60_000): Promise<Outcome> {
    return new Promise((resolve) => {
      execFile(
        this.name,
        [...args],
        { timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 },
        (error, stdout, stderr) => {
          const code = error === null ? 0 : typeof error.code === 'number' ? error.code : null
          resolve({ code, stdout, stderr })
        },
      )
    })
  }

  /** Like run, but throws with the engine's own words unless it exits 0; gives stdout. */
  async must(args: readonly string[], timeoutMs = 60_000): Promise<string> {
    const outcome = await this.run(args, timeoutMs)
    if (outcome.code !== 0) {
      throw new Error(
        `${this.name} ${args.join(' ')} exited ${String(outcome.code)}:\n${outcome.stderr}${outcome.stdout}`,
      )
    }
    return outcome.stdout
  }

  /**
   * `build` of one target with the base images as they are on this machine. Podman needs
   * `--format docker`: its default OCI format drops HEALTHCHECK (with only a warning).
   */
  buildArgs(tag: string, target: Target, context: string): string[] {
    return [
      'build',
      ...(this.name === 'podman' ? ['--format', 'docker', '--pull=never'] : ['--pull=false']),
      ...(target.target === undefined ? [] : ['--target', target.target]),
      '-t',
      tag,
      context,
    ]
  }

  /**
   * `run -d` options for a read-only root with only the data volume writable. Podman's
   * `--read-only` mounts writable tmpfs on /tmp, /var/tmp and /run unless told not to.
   */
  readOnlyArgs(): string[] {
    return this.name === 'podman' ? ['--read-only', '--read-only-tmpfs=false'] : ['--read-only']
  }

  /**
   * `run -d` as a user would, with no configuration: port 8080 published on a free loopback port,
   * the volume on /data, a read-only root. Returns the published URL.
   */
  async runDetached(name: string, volume: string, image: string): Promise<string> {
    await this.must([
      'run',
      '-d',
      '--name',
      name,
      '-p',
      '127.0.0.1::8080',
      '-v',
      `${volume}:/data`,
      ...this.readOnlyArgs(),
      image,
    ])
    return `http://127.0.0.1:${await this.hostPort(name)}`
  }

  /** The host port a container's 8080 is published on (`-p 127.0.0.1::8080`). */
  async hostPort(container: string): Promise<number> {
    const out = await this.must(['port', container, '8080'])
    const port = /:(\d+)\s*$/m.exec(out.split('\n')[0] ?? '')?.[1]
    if (port === undefined) throw new Error(`${this.name} port ${container} 8080 said: ${out}`)
    return Number(port)
  }

  /** The container's output (stdout then stderr), without the engine's own messages. */
  async logs(container: string): Promise<string> {
    const { stdout, stderr } = await this.run(['logs', container])
    return `${stdout}${stderr}`
  }

  /** One field of `inspect`, by Go template. */
  async inspect(object: string, format: string): Promise<string> {
    return (await this.must(['inspect', '--format', format, object])).trim()
  }

  /** The image's HEALTHCHECK as JSON: podman keeps it beside the config, docker inside it. */
  async healthcheck(image: string): Promise<string> {
    return this.inspect(
      image,
      this.name === 'podman' ? '{{json .HealthCheck}}' : '{{json .Config.Healthcheck}}',
    )
  }

  /**
   * Every path in an image's file system, without a leading /: a container is created, exported
   * as a tar into `dir` (podman cannot write a tar to a socket, which a child's pipe is) and listed.
   */
  async listFiles(image: string, container: string, dir: string): Promise<string[]> {
    const tar = path.join(dir, `${container}.tar`)
    await this.must(['create', '--name', container, image])
    try {
      await this.must(['export', '-o', tar, container], 300_000)
      const listing = await new Promise<string>((resolve, reject) => {
        execFile('tar', ['-tf', tar], { maxBuffer: 64 * 1024 * 1024 }, (error, stdout) => {
          if (error === null) resolve(stdout)
          else reject(error)
        })
      })
      return listing
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => line.replace(/^\.?\//, ''))
    } finally {
      await this.run(['rm', '-f', '-v', container])
      await rm(tar, { force: true })
    }
  }

  /** Removes containers, volumes and images by name; missing ones are fine. */
  async remove(what: {
    containers?: readonly string[]
    volumes?: readonly string[]
    images?: readonly string[]
  }): Promise<void> {
    // -v: the anonymous volumes of `create` (the image's VOLUME) go too.
    for (const name of what.containers ?? []) await this.run(['rm', '-f', '-v', name])
    for (const name of what.volumes ?? []) await this.run(['volume', 'rm', '-f', name])
    for (const name of what.images ?? []) await this.run(['rmi', '-f', name])
  }
}

/** podman, else docker, whichever answers `info`; or why neither can be used. */
export async function findEngine(): Promise<Engine | string> {
  const tried: string[] = []
  for (const name of ['podman', 'docker'] as const) {
    const engine = new Engine(name)
    const info = await engine.run(['info'], 30_000).catch(() => undefined)
    if (info?.code === 0) return engine
    tried.push(
      info === undefined || info.code === null
        ? `${name} is not installed or did not answer`
        : `${name} info failed`,
    )
  }
  return `no container engine runs here (${tried.join(', ')})`
}

/** The images the Dockerfile builds FROM (stage names and scratch left out). */
export async function baseImages(): Promise<string[]> {
  const text = await readFile(path.join(PROJECT_ROOT, 'Dockerfile'), 'utf8')
  const stages = new Set<string>(['scratch'])
  const bases: string[] = []
  for (const match of text.matchAll(/^FROM\s+(\S+)(?:\s+AS\s+(\S+))?/gim)) {
    const [, image, stage] = match
    if (image !== undefined && !stages.has(image) && !bases.includes(image)) bases.push(image)
    if (stage !== undefined) stages.add(stage)
  }
  return bases
}

/**
 * A clean tree: the project's files as a fresh clone has them (tracked, and new files git does not
 * ignore), without node_modules, dist or data. Without git, the project directory itself.
 */
export async function cleanTree(dir: string): Promise<string> {
  const listed = await new Promise<string | undefined>((resolve) => {
    execFile(
      'git',
      ['ls-files', '-z', '--cached', '--others', '--exclude-standard'],
      { cwd: PROJECT_ROOT, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout) => {
        resolve(error === null ? stdout : undefined)
      },
    )
  })
  if (listed === undefined) return PROJECT_ROOT
  for (const file of listed.split('\0')) {
    const from = path.join(PROJECT_ROOT, file)
    // A tracked file deleted in the working tree is not in a clean tree either.
    if (file === '' || !existsSync(from)) continue
    await mkdir(path.dirname(path.join(dir, file)), { recursive: true })
    await copyFile(from, path.join(dir, file))
  }
  return dir
}

/** Polls GET /healthz until a 200; resolves with the milliseconds since `since`. */
export async function waitForHealthz(
  url: string,
  since: number,
  timeoutMs: number,
): Promise<number> {
  const deadline = since + timeoutMs
  for (;;) {
    const status = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(1000) }).then(
      async (res) => {
        await res.arrayBuffer()
        return res.status
      },
      () => 0,
    )
    if (status === 200) return performance.now() - since
    if (performance.now() > deadline)
      throw new Error(`no 200 from ${url}/healthz within ${timeoutMs} ms`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}
