/** What a deleted user leaves behind: its id and when, nothing personal (§9). */
export interface Tombstone {
  readonly id: string
  readonly deletedAt: string
}
