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
