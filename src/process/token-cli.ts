/**
 * `npm run token -- --sub ID --scope "users:read users:write" --ttl 1h`: prints a token signed
 * with the service's configured secret (the same variables and DATA_DIR/.jwt-secret; `--data-dir`
 * names the directory instead of DATA_DIR).
 */
import path from 'node:path'
import { parseArgs } from 'node:util'

import { MAX_TOKEN_BYTES, SCOPES } from '../auth/authenticate.js'
import { parseDuration, signToken } from '../auth/sign-token.js'
import { isPrintable, isShortEnough, MAX_SUBJECT_CHARS } from '../auth/verify-token.js'
import { ConfigError, parseConfig } from './config.js'
import { noProductionSecret, readSecretFile, SECRET_FILE } from './first-start.js'

function main(): void {
  const { values } = parseArgs({
    options: {
      sub: { type: 'string' },
      scope: { type: 'string', default: SCOPES.join(' ') },
      ttl: { type: 'string', default: '1h' },
      kid: { type: 'string' },
      'data-dir': { type: 'string' },
    },
    strict: true,
  })
  if (values.sub === undefined || values.sub.trim() === '')
    throw new ConfigError('--sub is required (the user or client the token is for)')
  // A token the service would refuse (docs/api.md, tokens) is not printed as if it worked.
  if (!isPrintable(values.sub))
    throw new ConfigError('--sub: the service refuses a subject holding a control character')
  if (!isShortEnough(values.sub))
    throw new ConfigError(
      `--sub: the service refuses a subject over ${MAX_SUBJECT_CHARS} characters`,
    )
  const scopes = values.scope.split(/\s+/).filter((scope) => scope !== '')
  if (scopes.length === 0)
    throw new ConfigError(`--scope needs at least one scope (of ${SCOPES.join(', ')})`)
  const unknown = scopes.filter((scope) => !(SCOPES as readonly string[]).includes(scope))
  if (unknown.length > 0)
    throw new ConfigError(`--scope: unknown scope ${unknown.join(', ')} (use ${SCOPES.join(', ')})`)
  const config = parseConfig(process.env)
  // The first-start message names the data directory, as a shell may not have the service's DATA_DIR.
  const dataDir =
    values['data-dir'] === undefined ? config.dataDir : path.resolve(values['data-dir'])
  const file = path.join(dataDir, SECRET_FILE)
  // As the service: a token signed with a secret it would never read is not printed as if it worked.
  if (config.keys === undefined && config.production) throw noProductionSecret(file)
  const keys = config.keys ?? readSecretFile(file)
  if (keys === undefined) {
    throw new ConfigError(
      `no secret: set JWT_SECRET or JWT_SECRETS, or start the service once to create ${file}`,
    )
  }
  const key =
    values.kid === undefined
      ? keys.keys[0]
      : keys.keys.find((candidate) => candidate.kid === values.kid)
  if (key === undefined)
    throw new ConfigError(
      `--kid: no key has kid "${values.kid ?? ''}" (kids are given in JWT_SECRETS; JWT_SECRET and the first-start secret have none)`,
    )
  const now = Math.floor(Date.now() / 1000)
  const token = signToken(
    {
      sub: values.sub,
      scope: scopes.join(' '),
      iat: now,
      exp: now + parseDuration(values.ttl),
      ...(config.issuer === undefined ? {} : { iss: config.issuer }),
      ...(config.audience === undefined ? {} : { aud: config.audience }),
    },
    { key },
  )
  if (token.length > MAX_TOKEN_BYTES)
    throw new ConfigError('the token would be over 8 KiB, which the service refuses')
  process.stdout.write(`${token}\n`)
}

/** Prints the token, or says why not and exits 1. */
export function runTokenCli(): void {
  try {
    main()
  } catch (error) {
    process.stderr.write(`token: ${error instanceof Error ? error.message : String(error)}\n`)
    process.exit(1)
  }
}
