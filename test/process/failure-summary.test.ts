import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { writeFile } from 'node:fs/promises'
import path from 'node:path'
import { describe, it } from 'node:test'
import { promisify } from 'node:util'

import { PROJECT_ROOT } from '../helpers/child.js'
import { makeTempDir } from '../helpers/service.js'

const run = promisify(execFile)
const REPORTER = path.join(PROJECT_ROOT, 'scripts', 'failure-summary.mjs')

/** Runs node --test on one file with only the failure summary as reporter; its output and exit code. */
async function summarise(dir: string, source: string): Promise<{ code: number; output: string }> {
  const file = path.join(dir, 'fixture.test.mjs')
  await writeFile(file, source)
  const args = ['--test', `--test-reporter=${REPORTER}`, '--test-reporter-destination=stdout', file]
  // Without the parent runner's NODE_TEST_CONTEXT: with it, the child reports to this runner instead.
  const { NODE_TEST_CONTEXT: _parent, ...env } = process.env
  return run(process.execPath, args, { cwd: dir, env, timeout: 60_000 }).then(
    ({ stdout }) => ({ code: 0, output: stdout }),
    (error: { code?: number; stdout?: string }) => ({
      code: error.code ?? -1,
      output: error.stdout ?? '',
    }),
  )
}

describe('the failure summary printed after the coverage table (scripts/failure-summary.mjs)', () => {
  it('lists each failed test with its file and error, and not the suite that failed only by it', async (t) => {
    const dir = await makeTempDir(t)
    const { code, output } = await summarise(
      dir,
      [
        "import assert from 'node:assert/strict'",
        "import { describe, it } from 'node:test'",
        "describe('a suite', () => {",
        "  it('passes', () => assert.equal(1, 1))",
        "  it('compares wrongly', () => assert.equal(1, 2))",
        '})',
        "it('throws at the top', () => { throw new Error('boom at the top') })",
      ].join('\n'),
    )
    assert.equal(code, 1)
    const file = path.join(dir, 'fixture.test.mjs')
    assert.match(output, /^\nFailed tests \(2\):\n/)
    assert.ok(output.includes(`✖ ${file} › compares wrongly\n    AssertionError`), output)
    assert.ok(output.includes(`✖ ${file} › throws at the top\n    Error: boom at the top`), output)
    assert.doesNotMatch(output, /a suite|› passes/)
  })

  it('prints nothing when every test passes', async (t) => {
    const dir = await makeTempDir(t)
    const { code, output } = await summarise(
      dir,
      "import { it } from 'node:test'\nit('passes', () => {})\n",
    )
    assert.equal(code, 0)
    assert.equal(output, '')
  })
})
