import { createLineImporter, type LineImporter } from '../../bulk/import-line.js'
import type { IdGenerator } from '../../domain/uuid7.js'
import type { SharedSlots, Slot } from '../../ops/shared-slots.js'
import type { BulkSettings } from '../../settings-by-owner.js'
import type { Store } from '../../store/store.js'

/** The bulk settings (IMPORT_MAX_BYTES and the rest: src/settings.ts) and what the service gives. */
export interface BulkOptions extends BulkSettings {
  store: Store
  /** Where the one import at a time is counted: this process, or every worker of the service. */
  slots: SharedSlots
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
  /** The import slot (one at a time, service-wide): undefined while another import runs. */
  startImport(): Promise<Slot | undefined>
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
    startImport: () => options.slots.acquire('import', 1),
  }
}
