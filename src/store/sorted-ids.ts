/**
 * Ids in ascending order, held in chunks of at most CHUNK_MAX: putting or taking one id moves at
 * most a chunk's worth of the others. One sorted array moved every later id instead, so an import
 * of exported users (old ids, landing anywhere, newest first) cost time quadratic in its size.
 */
const CHUNK_MAX = 1024

/** Where a walk stands: the next id (peek) and a step to the one after it in the walk's order. */
export interface IdCursor {
  peek(): string | undefined
  advance(): void
}

export class SortedIds {
  /** Never empty chunks, each sorted, each one's ids below the next one's. */
  readonly #chunks: string[][] = []

  /** Adds an id that is not held yet. */
  insert(id: string): void {
    const chunks = this.#chunks
    const at = Math.min(this.#firstChunkReaching(id, false), chunks.length - 1)
    const chunk = chunks[at]
    if (chunk === undefined) {
      chunks.push([id])
      return
    }
    // New ids are time ordered, so they nearly always belong at the end.
    if (id > (chunk.at(-1) ?? '')) chunk.push(id)
    else chunk.splice(bound(chunk, id, false), 0, id)
    if (chunk.length > CHUNK_MAX) chunks.splice(at + 1, 0, chunk.splice(CHUNK_MAX / 2))
  }

  remove(id: string): void {
    const at = this.#firstChunkReaching(id, false)
    const chunk = this.#chunks[at]
    if (chunk === undefined) return
    const i = bound(chunk, id, false)
    if (chunk[i] !== id) return
    chunk.splice(i, 1)
    if (chunk.length === 0) this.#chunks.splice(at, 1)
  }

  /** Every id, ascending. */
  *ids(): Generator<string> {
    for (const chunk of this.#chunks) yield* chunk
  }

  /** A walk over the ids after `after` (ascending) or before it (descending); all without one. */
  cursor(order: 'asc' | 'desc', after: string | undefined): IdCursor {
    const chunks = this.#chunks
    let at: number
    let i: number
    if (order === 'asc') {
      at = after === undefined ? 0 : this.#firstChunkReaching(after, true)
      i = after === undefined ? 0 : bound(chunks[at] ?? [], after, true)
    } else {
      at = after === undefined ? chunks.length : this.#firstChunkReaching(after, false)
      i = at === chunks.length ? -1 : bound(chunks[at] ?? [], after ?? '', false) - 1
      if (i < 0) {
        at -= 1
        i = (chunks[at]?.length ?? 0) - 1
      }
    }
    return {
      peek: () => chunks[at]?.[i],
      advance: () => {
        if (order === 'asc') {
          i += 1
          if (i < (chunks[at]?.length ?? 0)) return
          at += 1
          i = 0
        } else {
          i -= 1
          if (i >= 0) return
          at -= 1
          i = (chunks[at]?.length ?? 0) - 1
        }
      },
    }
  }

  /** The first chunk whose last id is at least `id` (past it, when `strict`); the count if none. */
  #firstChunkReaching(id: string, strict: boolean): number {
    let low = 0
    let high = this.#chunks.length
    while (low < high) {
      const mid = (low + high) >>> 1
      const last = this.#chunks[mid]?.at(-1) ?? ''
      if (strict ? last <= id : last < id) low = mid + 1
      else high = mid
    }
    return low
  }
}

/** The first index whose id is not less than `id` (greater than it, when `strict`). */
function bound(ids: readonly string[], id: string, strict: boolean): number {
  let low = 0
  let high = ids.length
  while (low < high) {
    const mid = (low + high) >>> 1
    const at = ids[mid] ?? ''
    if (strict ? at <= id : at < id) low = mid + 1
    else high = mid
  }
  return low
}
