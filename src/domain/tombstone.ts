/** What a deleted user leaves behind: its id and when, nothing personal (docs/api.md, deleted subjects). */
export interface Tombstone {
  readonly id: string
  readonly deletedAt: string
}
