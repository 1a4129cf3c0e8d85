/**
 * `node dist/main.js`: the service alone, configured from the environment, as the docs and the
 * black-box suites start it (process/run-main.ts). The `user-service` command (bin.ts) also starts
 * it when given no subcommand.
 */
import { runMain } from './process/run-main.js'

runMain()
