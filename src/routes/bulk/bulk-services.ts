import type { IdGenerator } from '../../domain/uuid7.js'
import type { BulkSettings } from '../../settings.js'
import type { Store } from '../../store/store.js'
import { createLineImporter, type LineImporter } from './import-line.js'

/** The bulk settings (IMPORT_MAX_BYTES and the rest: src/settings.ts) and what the service gives. */
export interface BulkOptions extends BulkSettings {
  store: Store
  now: () => number
  newId: IdGenerator
  /** Throws to refuse a write (maintenance), as for every other write. */
  writeGate: () => void
  /** Users per store page while exporting (default 500). */
  exportPageSize?: number | undefined
  /**
   * Creates of one import in flight at once (default 256): one append to the event log (the file
   * store's write-ahead log) or one PostgreSQL transaction takes them all.
   */
  importConcurrency?: number | undefined
}

/** What the export and the import share: the store, their limits, and the one import running. */
export interface BulkServices {
  readonly store: Store
  readonly importLine: LineImporter
  readonly importMaxBytes: number
  readonly exportPageSize: number
  readonly importConcurrency: number
  readonly importReadAheadBytes: number
  readonly stallMs: number
  /** True while an import runs: one at a time. */
  importing: boolean
}

export function createBulkServices(options: BulkOptions): BulkServices {
  return {
    store: options.store,
    importLine: createLineImporter(options),
    importMaxBytes: options.importMaxBytes,
    exportPageSize: options.exportPageSize ?? 500,
    importConcurrency: options.importConcurrency ?? 256,
    importReadAheadBytes: options.importReadAheadBytes,
    stallMs: options.exportStallTimeoutMs,
    importing: false,
  }
}
