/** Whether a thrown value carries this errno code (`ENOENT`, `EEXIST`, …), as node:fs errors do. */
export function hasCode(error: unknown, code: string): boolean {
  return (Object(error) as { code?: unknown }).code === code
}
