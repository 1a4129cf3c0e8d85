// The bench's tables: one row per measured figure, `path | service | reference | ratio | goal |
// met`, as a Markdown table padded for the terminal (it pastes into docs/performance.md as is).

export interface Row {
  /** `issue`: a row of issue 30's table; `other`: the project's earlier figures. */
  readonly section: 'issue' | 'other'
  readonly path: string
  readonly service: string
  readonly reference: string
  readonly ratio: string
  readonly goal: string
  /** met, missed, info, or why there is no verdict (not run, skipped, invalid, error). */
  readonly met: string
}

/** The verdict of a measured row: a row with failed requests has none. */
export const judge = (pass: boolean | null, errors = 0): string => {
  if (errors > 0) return `invalid: ${errors} failed requests`
  if (pass === null) return 'info'
  return pass ? 'met' : 'missed'
}

const grouped = (n: number, digits = 0): string =>
  n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits })

export const fmt = {
  rps: (n: number): string => `${grouped(n)} rps`,
  perS: (n: number, what: string): string => `${grouped(n)} ${what}/s`,
  ratio: (n: number): string => (Number.isFinite(n) ? `${n.toFixed(2)}×` : '-'),
  ms: (n: number): string => `${n < 10 ? n.toFixed(2) : n.toFixed(1)} ms`,
  s: (ms: number): string => `${(ms / 1000).toFixed(2)} s`,
  us: (n: number): string => `${n.toFixed(1)} µs`,
  mb: (n: number): string => `${n.toFixed(1)} MB`,
}

/** A row whose case could not give a figure: every cell empty but the path, goal and why. */
export const emptyRow = (
  section: Row['section'],
  path: string,
  goal: string,
  why: string,
): Row => ({ section, path, service: '-', reference: '-', ratio: '-', goal, met: why })

/** A Markdown table; `right` names the columns aligned right. */
export const markdownTable = (
  header: readonly string[],
  rows: readonly (readonly string[])[],
  right: ReadonlySet<number> = new Set(),
): string => {
  const widths = header.map((h, i) =>
    Math.max(h.length, 3, ...rows.map((row) => (row[i] ?? '').length)),
  )
  const pad = (cell: string, i: number): string =>
    right.has(i) ? cell.padStart(widths[i] ?? 0) : cell.padEnd(widths[i] ?? 0)
  const line = (row: readonly string[]): string =>
    `| ${row.map((cell, i) => pad(cell, i)).join(' | ')} |`
  const rule = `|${widths.map((w, i) => (right.has(i) ? `${'-'.repeat(w + 1)}:` : '-'.repeat(w + 2))).join('|')}|`
  return [line(header), rule, ...rows.map(line)].join('\n')
}

export const renderRows = (rows: readonly Row[]): string =>
  markdownTable(
    ['path', 'service', 'reference', 'ratio', 'goal', 'met'],
    rows.map((r) => [r.path, r.service, r.reference, r.ratio, r.goal, r.met]),
    new Set([1, 2, 3]),
  )
