import path from 'node:path'
import { fileURLToPath } from 'node:url'

/**
 * The repository's root (helpers live two folders below it). A module of its own that imports
 * nothing of the tests: a file that names it stays in `npm run test:fast`, which leaves out every
 * file importing helpers/child.js.
 */
export const PROJECT_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
