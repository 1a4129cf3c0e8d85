import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'

import { PROJECT_ROOT } from './child.js'

/** The shim's source: fsync failures on demand and a log of the durable-write calls and writes. */
export const SHIM_SOURCE = path.join(PROJECT_ROOT, 'test', 'helpers', 'syscall-shim.c')

/** The resolution tests' shim: getaddrinfo that never answers, or answers at once, for test names. */
export const DNS_SHIM_SOURCE = path.join(PROJECT_ROOT, 'test', 'helpers', 'dns-shim.c')

/** The compiled shim, or why there is none (the caller skips with that reason). */
export type Shim =
  | { readonly library: string; readonly skip?: undefined }
  | { readonly library?: undefined; readonly skip: string }

const compiled = new Map<string, Shim>()

/**
 * Compiles a shim (the syscall shim unless told) once per test process into a temp directory
 * (removed at exit) with `cc -shared -fPIC … -ldl`. Without a C compiler, or on a system that is
 * not Linux (the shims wrap glibc; the syscall shim reads /proc/self/fd), it gives a reason to
 * skip instead.
 */
export function compileShim(source = SHIM_SOURCE): Shim {
  let shim = compiled.get(source)
  if (shim === undefined) {
    shim = compile(source)
    compiled.set(source, shim)
  }
  return shim
}

function compile(source: string): Shim {
  if (process.platform !== 'linux')
    return { skip: 'the shims need Linux (LD_PRELOAD over glibc, /proc/self/fd)' }
  try {
    execFileSync('cc', ['--version'], { stdio: 'ignore' })
  } catch {
    return { skip: 'no C compiler (`cc`) on this machine: the shims cannot be built' }
  }
  const dir = mkdtempSync(path.join(tmpdir(), 'syscall-shim-'))
  process.on('exit', () => {
    rmSync(dir, { recursive: true, force: true })
  })
  const library = path.join(dir, `${path.basename(source, '.c')}.so`)
  try {
    execFileSync('cc', ['-shared', '-fPIC', '-O1', '-Wall', '-o', library, source, '-ldl'], {
      stdio: ['ignore', 'ignore', 'pipe'],
    })
  } catch (error) {
    const stderr = (error as { stderr?: Buffer }).stderr?.toString() ?? String(error)
    return { skip: `${path.basename(source)} did not compile with cc: ${stderr.slice(0, 500)}` }
  }
  return { library }
}

/** The environment that turns the shim on in a child; only the keys given are set. */
export interface ShimEnvOptions {
  /** fsync and fdatasync fail while this file exists. */
  failMarker?: string
  /** Which descriptors fail (default both). */
  failKind?: 'file' | 'dir' | 'both'
  /** The errno number (default EIO). */
  failErrno?: number
  /** Only descriptors whose path starts with this fail (default all). */
  failUnder?: string
  /** The first failure removes the marker, so that later syncs work again. */
  failOnce?: boolean
  /** Renames onto a path under `failUnder` fail (with `failErrno`) while this file exists. */
  failRenameMarker?: string
  /** Opens for writing of a path under `failUnder` fail (with `failErrno`) while this file exists. */
  failOpenMarker?: string
  /** Makes every directory fsync take at least this long, as on a slow disk. */
  dirSyncDelayMs?: number
  /** Makes every fdatasync (the change feed's log) take at least this long. */
  dataSyncDelayMs?: number
  /** Makes every fsync and fdatasync take at least this long (a slow disk). */
  syncDelayMs?: number
  /** Where the calls are recorded. */
  log?: string
  /** Record only calls naming a path under this one. */
  logUnder?: string
}

export function shimEnv(library: string, options: ShimEnvOptions): Record<string, string> {
  const env: Record<string, string> = { LD_PRELOAD: library }
  if (options.failMarker !== undefined) env['SHIM_FAIL_MARKER'] = options.failMarker
  if (options.failKind !== undefined) env['SHIM_FAIL_KIND'] = options.failKind
  if (options.failErrno !== undefined) env['SHIM_FAIL_ERRNO'] = String(options.failErrno)
  if (options.failUnder !== undefined) env['SHIM_FAIL_UNDER'] = options.failUnder
  if (options.failOnce === true) env['SHIM_FAIL_ONCE'] = '1'
  if (options.failRenameMarker !== undefined)
    env['SHIM_FAIL_RENAME_MARKER'] = options.failRenameMarker
  if (options.failOpenMarker !== undefined) env['SHIM_FAIL_OPEN_MARKER'] = options.failOpenMarker
  if (options.dirSyncDelayMs !== undefined)
    env['SHIM_DIR_SYNC_DELAY_MS'] = String(options.dirSyncDelayMs)
  if (options.dataSyncDelayMs !== undefined)
    env['SHIM_DATASYNC_DELAY_MS'] = String(options.dataSyncDelayMs)
  if (options.syncDelayMs !== undefined) env['SHIM_SYNC_DELAY_MS'] = String(options.syncDelayMs)
  if (options.log !== undefined) env['SHIM_LOG'] = options.log
  if (options.logUnder !== undefined) env['SHIM_LOG_UNDER'] = options.logUnder
  return env
}

/**
 * One recorded call. `paths` are absolute; `flags` is set for opens; `dir` and `syncId` for fsyncs
 * and fdatasyncs, whose `begin` line (written just before the call starts) shares the `syncId`.
 */
export interface ShimCall {
  /** The line's position in the log (0 first). */
  readonly seq: number
  readonly pid: number
  readonly call: string
  readonly result: number
  readonly errno: number
  readonly paths: readonly string[]
  readonly flags?: number
  readonly dir?: boolean
  readonly syncId?: number
  readonly begin?: boolean
  /** For writes: the offset asked for (-1: the file position) and the first 64 bytes written. */
  readonly offset?: number
  readonly data?: string
  /** The byte offset just past this line in the log. */
  readonly end: number
}

/** Parses the shim's log (only whole lines; a line being written at read time is left out). */
export function readShimLog(file: string): ShimCall[] {
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch {
    return []
  }
  const calls: ShimCall[] = []
  let offset = 0
  for (const line of text.split('\n').slice(0, -1)) {
    offset += Buffer.byteLength(line) + 1
    const [pid = '', call = '', result = '', errno = '', a = '', b = '', extra = ''] =
      line.split('\t')
    const paths = [a, b].filter((item) => item !== '')
    const base = {
      seq: calls.length,
      pid: Number(pid),
      call,
      result: Number(result),
      errno: Number(errno),
      paths,
      end: offset,
    }
    if (call.startsWith('open') || call.startsWith('__open'))
      calls.push({ ...base, flags: Number.parseInt(extra, 16) })
    else if (call.startsWith('fsync') || call.startsWith('fdatasync')) {
      const [kind, id] = extra.split(' ')
      calls.push({
        ...base,
        call: call.replace(/-begin$/, ''),
        begin: call.endsWith('-begin'),
        dir: kind === 'dir',
        syncId: Number(id),
      })
    } else if (WRITES.has(call)) {
      const space = extra.indexOf(' ')
      calls.push({
        ...base,
        offset: Number(extra.slice(0, space)),
        data: unescapeBytes(extra.slice(space + 1)),
      })
    } else calls.push(base)
  }
  return calls
}

const WRITES = new Set([
  'write',
  'pwrite',
  'pwrite64',
  'writev',
  'pwritev',
  'pwritev64',
  'pwritev2',
])

/** The shim escapes a byte outside printable ASCII, and the backslash, as \xHH. */
function unescapeBytes(text: string): string {
  return text.replace(/\\x([0-9a-f]{2})/g, (_, hex: string) =>
    String.fromCharCode(Number.parseInt(hex, 16)),
  )
}

/** The log's size in bytes now: calls with `end` up to it happened before this moment. */
export function shimLogSize(file: string): number {
  try {
    return readFileSync(file).length
  } catch {
    return 0
  }
}
