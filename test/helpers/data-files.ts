import { readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'

/** The lock files a data directory holds now (`.lock.<n>`, and a 0.1.0 `.lock`). */
export function listLockFiles(dataDir: string): string[] {
  try {
    return readdirSync(dataDir)
      .filter((name) => /^\.lock(\.\d+)?$/.test(name))
      .sort()
  } catch {
    return []
  }
}

/** The parsed content of `users/<id>.json` (or of `tombstones/<id>.json`), or undefined when missing. */
export function readUserFile(
  dataDir: string,
  id: string,
  folder: 'users' | 'tombstones' = 'users',
): Record<string, unknown> | undefined {
  let text: string
  try {
    text = readFileSync(path.join(dataDir, folder, `${id}.json`), 'utf8')
  } catch {
    return undefined
  }
  return JSON.parse(text) as Record<string, unknown>
}

/** Matches an RFC 3339 UTC time stamp with milliseconds. */
export const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
