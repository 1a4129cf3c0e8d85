/**
 * The step of a durable write that failed; `file-sync` and `dir-sync` are fsyncs, `rename` is the
 * directory change itself (a rename or an unlink).
 */
export type WriteStep = 'write' | 'file-sync' | 'rename' | 'dir-sync'

/**
 * A durable write that failed. `applied` says whether the new content is what the storage now
 * shows: only when the rename happened and the directory fsync after it failed. What a failed
 * write means for the store (refused, read-only, outcome unknown) is decided from it alone.
 */
export class WriteError extends Error {
  override name = 'WriteError'
  readonly step: WriteStep
  readonly applied: boolean
  /** The errno code of the failed call (EIO, ENOSPC, EROFS…), as on Node's own errors. */
  readonly code: string | undefined

  constructor(step: WriteStep, cause: unknown, applied = step === 'dir-sync') {
    super(
      `a durable write failed at ${step}: ${cause instanceof Error ? cause.message : String(cause)}`,
      { cause },
    )
    this.step = step
    this.applied = applied
    const code: unknown =
      typeof cause === 'object' && cause !== null ? (cause as { code?: unknown }).code : undefined
    this.code = typeof code === 'string' ? code : undefined
  }

  /** True when an fsync failed: after that, nothing the kernel holds for these files is trusted. */
  get fsyncFailed(): boolean {
    return this.step === 'file-sync' || this.step === 'dir-sync'
  }
}
