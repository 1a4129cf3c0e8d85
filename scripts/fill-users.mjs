#!/usr/bin/env node
/**
 * Fills a data directory with users, written straight in the file store's format
 * (DATA_DIR/users/<uuidv7>.json, mode 0600), much faster than creating them through the API.
 * For measurements (the "Constrained machines" table of docs/embedding.md); needs `npm run build` first.
 *
 *   node scripts/fill-users.mjs <DATA_DIR> <COUNT>
 */
import { mkdirSync, writeFileSync } from 'node:fs'
import path from 'node:path'

import { toRecord } from '../dist/domain/user.js'
import { createIdGenerator } from '../dist/domain/uuid7.js'

const [dataDir, countText] = process.argv.slice(2)
const count = Number(countText)
if (dataDir === undefined || !Number.isSafeInteger(count) || count < 0) {
  console.error('usage: node scripts/fill-users.mjs <DATA_DIR> <COUNT>')
  process.exit(2)
}
const usersDir = path.join(dataDir, 'users')
mkdirSync(usersDir, { recursive: true, mode: 0o700 })
const nextId = createIdGenerator()
for (let n = 0; n < count; n += 1) {
  const { id, ms } = nextId(Date.now())
  const at = new Date(ms).toISOString()
  const { json } = toRecord({
    id,
    email: `user${n}@example.com`,
    name: `User ${n}`,
    status: 'active',
    metadata: { team: `t${n % 50}` },
    createdAt: at,
    updatedAt: at,
    version: 1,
  })
  writeFileSync(path.join(usersDir, `${id}.json`), json, { mode: 0o600 })
}
console.log(`${count} users in ${usersDir}`)
