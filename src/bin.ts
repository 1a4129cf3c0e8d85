#!/usr/bin/env node
/**
 * The command `user-service` (the package's `bin`, `npm start`, `npm run token`, the one-file
 * bundle and the single executable): its subcommands are in process/cli.ts.
 */
import { runCli } from './process/cli.js'

runCli()
