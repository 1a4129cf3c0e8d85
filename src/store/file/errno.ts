/** Whether a thrown value carries this errno code (`ENOENT`, `EEXIST`, …), as node:fs errors do. */
export function hasCode(error: unknown, code: string): boolean {
  return (Object(error) as { code?: unknown }).code === code
}

/** Codes of a call refused for want of descriptors or memory: they say nothing about the disk. */
const SHORT_OF_RESOURCES = ['EMFILE', 'ENFILE', 'ENOMEM']

/** Whether a call failed because the process or the system ran short of descriptors or memory. */
export function isShortOfResources(error: unknown): boolean {
  return SHORT_OF_RESOURCES.some((code) => hasCode(error, code))
}

/**
 * The error of a read of `file`, naming it: node:fs names the path of a failed open(2) but not
 * of a failed read(2) (EISDIR for a directory where a file belongs, EIO), which would leave an
 * operator guessing which file refused the start. Its code, errno and syscall are kept.
 */
export function namingFile(error: unknown, file: string): unknown {
  if (!(error instanceof Error) || (error as { path?: unknown }).path !== undefined) return error
  const { code, errno, syscall } = error as { code?: unknown; errno?: unknown; syscall?: unknown }
  return Object.assign(new Error(`${error.message} '${file}'`), {
    code,
    errno,
    syscall,
    path: file,
  })
}
