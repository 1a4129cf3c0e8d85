/**
 * Loaded with `--import` before the service in a child of the resolution tests. It points Node's
 * DNS servers at the test's own (TEST_DNS_SERVER), as an embedding program may with
 * dns.setServers(). On SIGUSR2 it resolves `probe.ok.test` with the system resolver and prints
 * `probe <outcome> <ms>` on stderr: whether the thread pool still had a thread for a lookup of the
 * process's own (the database driver's, an embedding program's).
 */
import { lookup, setServers } from 'node:dns'
import { performance } from 'node:perf_hooks'

const server = process.env['TEST_DNS_SERVER']
if (server !== undefined) setServers([server])

process.on('SIGUSR2', () => {
  const started = performance.now()
  lookup('probe.ok.test', (error) => {
    const ms = Math.round(performance.now() - started)
    process.stderr.write(`probe ${error === null ? 'resolved' : String(error.code)} ${ms}\n`)
  })
})
