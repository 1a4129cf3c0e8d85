import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { dataDirFlag, type Launch, tokenCommand } from '../../src/process/first-start-message.js'

function launch(argv: readonly string[], npmScript?: string): Launch {
  return { argv, execArgv: [], execPath: '/usr/bin/node', cwd: '/srv/app', npmScript }
}

describe('the first-start token command', () => {
  it('is npm run token under npm start', () => {
    assert.equal(
      tokenCommand(launch(['/usr/bin/node', '/srv/app/dist/bin.js'], 'start')),
      'npm run -s token --',
    )
  })

  it('is the command itself when started as bin.js', () => {
    assert.equal(
      tokenCommand(launch(['/usr/bin/node', '/srv/app/dist/bin.js'])),
      'node dist/bin.js token',
    )
  })

  it('names bin.js when started as main.js, which only serves whatever its arguments', () => {
    assert.equal(
      tokenCommand(launch(['/usr/bin/node', '/srv/app/dist/main.js'])),
      'node dist/bin.js token',
    )
    assert.equal(
      tokenCommand(launch(['/usr/bin/node', '/srv/app/src/main.ts'])),
      'node src/bin.ts token',
    )
  })

  it("is the executable's subcommand for the single executable", () => {
    const executable = '/usr/local/bin/user-service'
    const sea: Launch = { ...launch([executable, executable]), execPath: executable }
    assert.equal(tokenCommand(sea), '/usr/local/bin/user-service token')
  })

  it('names the data directory when it is not data in the working directory', () => {
    const at = launch(['/usr/bin/node', '/srv/app/dist/bin.js'])
    assert.equal(dataDirFlag('/srv/app/data', at), '')
    assert.equal(dataDirFlag('/var/lib/users', at), ' --data-dir /var/lib/users')
    assert.equal(dataDirFlag("/tmp/it's here", at), ` --data-dir '/tmp/it'\\''s here'`)
  })
})
