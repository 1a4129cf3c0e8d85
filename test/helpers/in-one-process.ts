/*
 * Runs the in-process test files (scripts/in-process-tests.sh) in this one process, for
 * `node --test`: `IN_PROCESS_TEST_FILES` names them, one path from the repository's root per line.
 *
 * A test file in a process of its own pays for a Node, the tsx hooks and the service's modules
 * before its first test: on Node 20 that was 242 s of CPU for these files against 94 s in one
 * process, on the suite's two cores. What that changes for a test file: it shares the modules'
 * state with the others; its top-level `before()` and `after()` become the whole run's (an
 * `after()` runs at the very end); the files are loaded within seconds while the first tests run,
 * and their tests wait their turn, so a time read when a file loads is minutes old when its tests
 * use it. The tests run one after the other, in the files' order, while `node --test` runs the
 * files that start children beside them.
 */
import path from 'node:path'
import { pathToFileURL } from 'node:url'

import { PROJECT_ROOT } from './project-root.js'

const files = (process.env.IN_PROCESS_TEST_FILES ?? '').split('\n').filter((line) => line !== '')
if (files.length === 0) throw new Error('IN_PROCESS_TEST_FILES names no test file')
for (const file of files) await import(pathToFileURL(path.resolve(PROJECT_ROOT, file)).href)
