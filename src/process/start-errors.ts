/**
 * What the outside world throws while the process starts, as one line naming the setting to fix
 * (a StartError); an error already saying so passes through unchanged.
 */
import { StartError } from '../domain/errors.js'

/** A data directory the process cannot make, write or lock, as one line naming DATA_DIR. */
export function unusableDataDir(dataDir: string, error: unknown): unknown {
  const code = errnoOf(error)
  if (error instanceof StartError || code === undefined) return error
  return new StartError(
    `DATA_DIR ${dataDir} cannot be used (${code}): it must be a directory this user may create, read and write`,
  )
}

/** An address the server cannot listen on, as one line naming HOST or PORT. */
export function unusableAddress(host: string, port: number, error: unknown): unknown {
  const code = errnoOf(error)
  if (code === 'EADDRINUSE') return new StartError(`PORT ${port} is in use on ${host} (EADDRINUSE)`)
  if (code === 'EACCES')
    return new StartError(`PORT ${port} needs privileges this user lacks (EACCES)`)
  if (code === undefined) return error
  return new StartError(
    `HOST ${host} cannot be listened on (${code}): give one of the host's own addresses`,
  )
}

/**
 * A database that does not answer or refuses us, as one line naming DATABASE_URL, where it points
 * and what the server (or the socket) said; never the URL itself, which may hold a password.
 */
export function unusableDatabase(databaseUrl: string, error: unknown): unknown {
  if (error instanceof StartError) return error
  const said = error instanceof Error ? error.message : String(error)
  return new StartError(
    `DATABASE_URL (${whereDatabase(databaseUrl)}) cannot be used: ${said.replace(/\s+/g, ' ').trim()}`,
  )
}

/** host:port/database of a PostgreSQL URL, without its user or password. */
function whereDatabase(databaseUrl: string): string {
  const url = new URL(databaseUrl)
  // A Unix socket is named by a host parameter (postgres:///db?host=/run/postgresql).
  const host = url.hostname === '' ? (url.searchParams.get('host') ?? 'localhost') : url.hostname
  const database = url.pathname.slice(1) || '(the user name)'
  return `${host}:${url.port === '' ? '5432' : url.port}/${database}`
}

function errnoOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code
  return typeof code === 'string' && /^E[A-Z]+$/.test(code) ? code : undefined
}
