import path from 'node:path'

import { ConfigError, SETTINGS } from '../settings.js'
import type { Settings } from '../settings-by-owner.js'

export { ConfigError } from '../settings.js'

/**
 * The service's configuration, validated and frozen; built once from the environment. Every
 * setting is declared in src/settings.ts: its variable, default, parser and meaning.
 */
export type Config = Settings

type Env = Readonly<Record<string, string | undefined>>

/** Reads every variable the service knows, refusing the first bad one by name. */
export function parseConfig(env: Env, cwd = process.cwd()): Config {
  const read = (name: string): string | undefined => {
    const value = env[name]
    return value === undefined || value.trim() === '' ? undefined : value.trim()
  }
  const values: Record<string, unknown> = {}
  for (const [key, spec] of Object.entries(SETTINGS)) {
    const name = spec.env.find((candidate) => read(candidate) !== undefined)
    const text = name === undefined ? undefined : read(name)
    values[key] = name === undefined || text === undefined ? spec.default : spec.parse(text, name)
  }
  // Each entry of SETTINGS filled its own key with its own type above.
  const config = values as unknown as Settings
  checkWorkers(config, read('WORKERS'))
  return Object.freeze({ ...config, dataDir: path.resolve(cwd, config.dataDir) })
}

/**
 * More than one worker needs DATABASE_URL: the file store holds its users in one process's memory
 * and locks DATA_DIR for that process.
 */
function checkWorkers(config: Settings, text: string | undefined): void {
  if (config.workers > 1 && config.databaseUrl === undefined) {
    throw new ConfigError(
      `WORKERS=${text ?? config.workers} needs DATABASE_URL: the file store keeps users in one process's memory and locks DATA_DIR for that one process`,
    )
  }
}
