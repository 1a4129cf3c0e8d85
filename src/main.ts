/** `node dist/main.js`: the service, configured from the environment (process/main.ts). */
import { runMain } from './process/main.js'

runMain()
