/**
 * The command `user-service` (src/bin.ts runs it): `user-service` starts the service,
 * `user-service token --sub ID --scope "…" --ttl 1h` prints a token, `user-service export|import`
 * move users through a running service, `user-service healthcheck` exits 0 when the running
 * service answers /healthz (the binary image's HEALTHCHECK). Each command is loaded only when it
 * is chosen; `--help` after any of them prints its usage and exits 0.
 */
import cluster from 'node:cluster'

import { COMMAND_USAGE, USAGE } from './cli-usage.js'

const isHelp = (arg: string | undefined): boolean =>
  arg === '--help' || arg === '-h' || arg === 'help'

/** The commands configured by the environment alone: an argument to them is a mistake. */
const TAKES_NO_ARGUMENTS: ReadonlySet<string> = new Set(['serve', 'healthcheck'])

/** Runs the command named by process.argv[2]; each is loaded only when chosen. */
export function runCli(): void {
  // A worker of WORKERS > 1 serves, whatever its arguments: node:cluster forks with argv[1] as
  // the script, which in the single executable is the executable itself, so its workers would
  // read their own path as the command (and, refused, wait on the primary's channel forever).
  const command = cluster.isWorker ? 'serve' : process.argv[2]
  const args = cluster.isWorker ? [] : process.argv.slice(3)
  const usage = command === undefined ? undefined : COMMAND_USAGE.get(command)
  if (isHelp(command)) {
    process.stdout.write(USAGE)
  } else if (usage !== undefined && args.some(isHelp)) {
    process.stdout.write(usage)
  } else if (usage !== undefined && TAKES_NO_ARGUMENTS.has(command ?? '') && args.length > 0) {
    // `serve --port 3000` would otherwise serve on PORT as if the flag had been read.
    process.stderr.write(`user-service ${command}: unexpected argument "${args[0]}"\n${usage}`)
    process.exitCode = 2
  } else if (command === 'token') {
    // The token command reads its flags from process.argv: the subcommand is not one of them.
    process.argv.splice(2, 1)
    void import('./token-cli.js').then(({ runTokenCli }) => {
      runTokenCli()
    })
  } else if (command === 'export' || command === 'import') {
    // No top-level await: the one-file bundle may be built as CommonJS for the single executable.
    void import('./bulk-cli.js')
      .then(({ runBulkCli }) => runBulkCli(command, args, process))
      .then((code) => {
        process.exitCode = code
      })
  } else if (command === 'healthcheck') {
    void import('./healthcheck-cli.js')
      .then(({ runHealthcheck }) => runHealthcheck(process.env, process.stderr))
      .then((code) => {
        process.exitCode = code
      })
  } else if (command === undefined || command === 'serve') {
    void import('./run-main.js').then(({ runMain }) => {
      runMain()
    })
  } else {
    process.stderr.write(`user-service: unknown command "${command}"\n${USAGE}`)
    process.exitCode = 2
  }
}
