import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { describe, it } from 'node:test'
import { promisify } from 'node:util'

import { helperScript } from '../helpers/child-scripts.js'

/** What the cluster (test/helpers/slot-cluster.ts) prints. */
interface SlotClusterReport {
  readonly blockMs: number
  readonly granted: boolean
  readonly releaseMs: number
  readonly grantedAgain: boolean
}

const run = promisify(execFile)
const CLUSTER = helperScript('slot-cluster')

describe('cluster slots (WORKERS > 1)', () => {
  it("a worker's release resolves only once the primary has the slot back", async () => {
    const { stdout } = await run(process.execPath, [CLUSTER], {
      timeout: 30_000,
    })
    const report = JSON.parse(stdout.trim()) as SlotClusterReport
    assert.equal(report.granted, true)
    // The primary was busy for blockMs when the release was sent: it could not answer sooner.
    assert.ok(
      report.releaseMs >= report.blockMs / 2,
      `the release resolved after ${report.releaseMs} ms`,
    )
    assert.equal(report.grantedAgain, true)
  })
})
