import { createRequire } from 'node:module'

import { StartError } from '../../domain/errors.js'
import type { PgModule } from './pg-types.js'

/** Imports a module by name; tests pass one that fails. */
export type Importer = (name: string) => Promise<unknown>

const importModule: Importer = async (name) => {
  // The single executable has no file of its own to resolve from: its import() looks where it
  // was built. It looks in node_modules beside the executable, where `npm install pg` puts it.
  if (await isSingleExecutable()) return createRequire(process.execPath)(name)
  return import(name)
}

/** node:sea is there from Node 20.12; with an older Node the executable keeps import()'s way. */
async function isSingleExecutable(): Promise<boolean> {
  try {
    const sea = (await import('node:sea')) as { isSea?: () => boolean }
    return sea.isSea?.() === true
  } catch {
    return false
  }
}

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
  const module = (loaded as { default?: unknown }).default ?? loaded
  if (!isPgModule(module))
    throw new StartError('the pg module has no Pool: install pg 8.x (npm install pg)')
  return module
}

/** A Pool constructor is what tells pg 8.x apart; the rest of its shape is taken on trust. */
function isPgModule(value: unknown): value is PgModule {
  return typeof (value as { Pool?: unknown }).Pool === 'function'
}

function isModuleMissing(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code
  return code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND'
}
