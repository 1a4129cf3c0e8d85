/** The one-file entry (dist/user-service.mjs and the single executable): see process/cli.ts. */
import { runCli } from './process/cli.js'

runCli()
