import { SCOPES } from '../auth/authenticate.js'

/** The usage of `user-service` and of each of its commands (process/cli.ts). */
export const TOKEN_USAGE =
  `usage: user-service token --sub ID [--scope "${SCOPES.join(' ')}"] [--ttl 1h] [--kid KID] [--data-dir DIR]\n` +
  "       prints a token signed with the service's secret (JWT_SECRET, JWT_SECRETS or DATA_DIR/.jwt-secret);\n" +
  '       --scope defaults to every scope shown, --ttl to 1h (s, m, h or d), --kid to the first key,\n' +
  '       --data-dir to DATA_DIR (where the first start wrote .jwt-secret)\n'
export const BULK_USAGE =
  'usage: user-service export|import [--url URL] [--token TOKEN]' +
  ' (or USER_SERVICE_URL / USER_SERVICE_TOKEN); export writes NDJSON to stdout, import reads it from stdin\n'
export const HEALTHCHECK_USAGE =
  'usage: user-service healthcheck (exit 0 when the service on HOST and PORT answers /healthz)\n'
export const SERVE_USAGE =
  'usage: user-service [serve] (configured by environment variables: see docs/configuration.md)\n'

/** Every command's usage: `user-service --help`. */
export const USAGE = `${SERVE_USAGE}${TOKEN_USAGE}${BULK_USAGE}${HEALTHCHECK_USAGE}`

/** Each command's usage by name (`user-service COMMAND --help`): a Map, the name is the user's. */
export const COMMAND_USAGE: ReadonlyMap<string, string> = new Map([
  ['serve', SERVE_USAGE],
  ['token', TOKEN_USAGE],
  ['export', BULK_USAGE],
  ['import', BULK_USAGE],
  ['healthcheck', HEALTHCHECK_USAGE],
])
