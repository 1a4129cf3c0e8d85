import type pg from 'pg'

import { StartError } from '../../domain/errors.js'

/** The part of the `pg` module the store uses. */
export type PgModule = Pick<typeof pg, 'Pool'>

/** Imports a module by name; tests pass one that fails. */
export type Importer = (name: string) => Promise<unknown>

const importModule: Importer = (name) => import(name)

/**
 * Loads the `pg` driver, an optional peer dependency: the core has no runtime dependency, and only
 * a service started with DATABASE_URL needs it. Its absence refuses the start, saying what to do.
 */
export async function loadPg(importer: Importer = importModule): Promise<PgModule> {
  let loaded: unknown
  try {
    loaded = await importer('pg')
  } catch (error) {
    if (isModuleMissing(error)) {
      throw new StartError(
        'DATABASE_URL is set but the PostgreSQL driver is not installed: npm install pg',
      )
    }
    throw error
  }
  // pg is CommonJS: its exports arrive as the default export of the ES module namespace.
  const namespace = loaded as { default?: PgModule } & Partial<PgModule>
  const module = namespace.default ?? namespace
  if (typeof module.Pool !== 'function')
    throw new StartError('the pg module has no Pool: install pg 8.x (npm install pg)')
  return module as PgModule
}

function isModuleMissing(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code
  return code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND'
}
