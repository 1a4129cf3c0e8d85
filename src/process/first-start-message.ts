/**
 * What the first start prints once, on stderr and outside the JSON logs: where the new secret is,
 * a token, a curl line a user can paste, and the command that makes more tokens, as it exists
 * where the service runs (npm start, node with a script, or the single executable).
 */
import path from 'node:path'

import { SCOPES } from '../auth/authenticate.js'
import type { KeySet } from '../auth/keys.js'
import { signToken } from '../auth/sign-token.js'
import type { Config } from './config.js'

/** How the process was started: process.argv, execArgv, execPath, the cwd, npm's script name. */
export interface Launch {
  readonly argv: readonly string[]
  readonly execArgv: readonly string[]
  readonly execPath: string
  readonly cwd: string
  /** npm_lifecycle_event: `start` under `npm start`. */
  readonly npmScript: string | undefined
}

export interface FirstStart {
  /** The URL the service listens on (the `listening` log line's). */
  readonly url: string
  readonly config: Pick<Config, 'basePath' | 'issuer' | 'audience'>
  readonly keys: KeySet
  /** The secret's new file. */
  readonly file: string
  readonly launch: Launch
  /** Seconds since the epoch. */
  readonly now: number
}

/**
 * The token's scopes: the users API's. The feed's and the webhooks' scopes stand alone: the feed's
 * is shown on its own, the webhooks' is made when needed (docs/webhooks.md).
 */
const FIRST_SCOPES = SCOPES.filter((scope) => scope.startsWith('users:'))

/** Prints the message on stderr with a token signed now: the first start's, once it listens. */
export function printFirstStart(start: Omit<FirstStart, 'now'>): void {
  const message = formatFirstStart({ ...start, now: Math.floor(Date.now() / 1000) })
  if (message !== undefined) process.stderr.write(message)
}

/** The message, or undefined when there is no key to sign with. */
export function formatFirstStart(start: FirstStart): string | undefined {
  const key = start.keys.keys[0]
  if (key === undefined) return undefined
  const { config, now } = start
  const token = signToken(
    {
      sub: 'first-start-admin',
      scope: FIRST_SCOPES.join(' '),
      iat: now,
      exp: now + 24 * 3600,
      ...(config.issuer === undefined ? {} : { iss: config.issuer }),
      ...(config.audience === undefined ? {} : { aud: config.audience }),
    },
    { key },
  )
  const command = `${tokenCommand(start.launch)}${dataDirFlag(path.dirname(start.file), start.launch)}`
  return [
    '',
    `No JWT_SECRET was set, so a new random secret was written to ${start.file} (mode 0600).`,
    'It is used on every later start with this DATA_DIR. Set JWT_SECRET in production.',
    '',
    `A token with the scopes ${FIRST_SCOPES.join(', ')} (not events:read or webhooks:admin), valid for 24 hours:`,
    '',
    `  ${token}`,
    '',
    'Try it:',
    '',
    `  curl -H "Authorization: Bearer ${token}" ${reachableUrl(start.url)}${config.basePath}/users`,
    '',
    'More tokens, where the service runs (in a container: docker exec CONTAINER …):',
    '',
    `  ${command} --sub ID --scope "users:read users:write" --ttl 1h`,
    '',
    'The change feed (GET /events) needs the scope events:read, on a token of its own:',
    '',
    `  ${command} --sub feed-reader --scope events:read`,
    '',
    '',
  ].join('\n')
}

/** A wildcard address (0.0.0.0, ::) is bound to, not called: a client reaches it on loopback. */
export function reachableUrl(url: string): string {
  const parsed = new URL(url)
  if (parsed.hostname === '0.0.0.0') parsed.hostname = '127.0.0.1'
  else if (parsed.hostname === '[::]') parsed.hostname = '[::1]'
  return parsed.origin
}

/**
 * The token command as this process was started: `npm run -s token --` under npm start; the
 * executable's `token` subcommand for the single executable (no script in argv); else node with
 * the same flags and script (`bin.js` for `main.js`, which only serves), `token`.
 */
export function tokenCommand(launch: Launch): string {
  if (launch.npmScript === 'start') return 'npm run -s token --'
  const script = launch.argv[1]
  if (script === undefined || path.resolve(script) === launch.execPath)
    return `${shellWord(launch.execPath)} token`
  // `node dist/main.js` starts the service whatever its arguments: the command is its sibling.
  const command = /^main\.[cm]?[jt]s$/.test(path.basename(script))
    ? path.join(path.dirname(script), path.basename(script).replace(/^main/, 'bin'))
    : script
  const relative = path.relative(launch.cwd, command)
  const shown = relative.startsWith('..') || path.isAbsolute(relative) ? command : relative
  return ['node', ...launch.execArgv, shown, 'token'].map(shellWord).join(' ')
}

/**
 * ` --data-dir DIR` when the secret is not where the token command looks without DATA_DIR (`data`
 * in the working directory): a shell that started the service with `DATA_DIR=… node …` does not
 * have it, and the command would find no secret there, or another one.
 */
export function dataDirFlag(dataDir: string, launch: Pick<Launch, 'cwd'>): string {
  return path.resolve(launch.cwd, 'data') === dataDir ? '' : ` --data-dir ${shellWord(dataDir)}`
}

function shellWord(text: string): string {
  return /^[\w@%+=:,./-]+$/.test(text) ? text : `'${text.replaceAll("'", "'\\''")}'`
}
