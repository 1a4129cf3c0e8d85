/**
 * The one-file entry (dist/user-service.mjs and the single executable): `user-service` starts the
 * service, `user-service token --sub ID --scope "…" --ttl 1h` prints a token, `user-service
 * healthcheck` exits 0 when the running service answers /healthz (the binary image's HEALTHCHECK).
 * Each command is loaded only when it is chosen.
 */
const USAGE =
  'usage: user-service [serve] | user-service token --sub ID [--scope "users:read …"] [--ttl 1h] [--kid KID]\n' +
  '       user-service export|import --url URL --token TOKEN (NDJSON on stdout / stdin)\n' +
  '       user-service healthcheck (exit 0 when the service on PORT answers /healthz)\n'

/** Runs the command named by process.argv[2]; each is loaded only when chosen. */
export function runCli(): void {
  const command = process.argv[2]
  if (command === 'token') {
    // The token command reads its flags from process.argv: the subcommand is not one of them.
    process.argv.splice(2, 1)
    void import('./token-cli.js').then(({ runTokenCli }) => {
      runTokenCli()
    })
  } else if (command === 'export' || command === 'import') {
    // No top-level await: the one-file bundle may be built as CommonJS for the single executable.
    void import('./bulk-cli.js')
      .then(({ runBulkCli }) => runBulkCli(command, process.argv.slice(3), process))
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
    void import('./main.js').then(({ runMain }) => {
      runMain()
    })
  } else if (command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(USAGE)
  } else {
    process.stderr.write(`user-service: unknown command "${command}"\n${USAGE}`)
    process.exitCode = 2
  }
}
