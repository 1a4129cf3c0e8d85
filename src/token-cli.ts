/** `npm run token`: prints a token signed with the service's secret (process/token-cli.ts). */
import { runTokenCli } from './process/token-cli.js'

runTokenCli()
