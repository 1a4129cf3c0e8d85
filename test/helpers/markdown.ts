import { readFileSync } from 'node:fs'
import path from 'node:path'

import { PROJECT_ROOT } from './project-root.js'

/** A file of the repository as text, by its path from the root (`docs/bulk.md`). */
export function readRepoFile(relative: string): string {
  return readFileSync(path.join(PROJECT_ROOT, relative), 'utf8')
}

/** The document's lines outside fenced code blocks, with their 1-based line numbers. */
export function proseLines(text: string): { line: number; text: string }[] {
  const lines: { line: number; text: string }[] = []
  let fence: string | undefined
  text.split('\n').forEach((line, index) => {
    const marker = /^\s*(`{3,}|~{3,})/.exec(line)?.[1]
    if (marker !== undefined && (fence === undefined || marker.startsWith(fence))) {
      fence = fence === undefined ? marker : undefined
      return
    }
    if (fence === undefined) lines.push({ line: index + 1, text: line })
  })
  return lines
}

/** GitHub's anchor for a heading's text (lower case, punctuation dropped, spaces to hyphens). */
export function slugOf(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-')
}

/** Every anchor a document's headings make, a repeated one numbered as GitHub does (`-1`, `-2`). */
export function anchorsOf(text: string): Set<string> {
  const anchors = new Set<string>()
  const seen = new Map<string, number>()
  for (const { text: line } of proseLines(text)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1]
    if (heading === undefined) continue
    const slug = slugOf(heading)
    const count = seen.get(slug) ?? 0
    seen.set(slug, count + 1)
    anchors.add(count === 0 ? slug : `${slug}-${count}`)
  }
  return anchors
}

export interface MarkdownLink {
  readonly line: number
  readonly target: string
}

/** Inline links and images outside code (fenced blocks and `code spans`); link text may wrap. */
export function linksOf(text: string): MarkdownLink[] {
  // Fenced lines become empty lines, so that an offset still gives its line number.
  const lines = text.split('\n').map(() => '')
  for (const { line, text: prose } of proseLines(text))
    lines[line - 1] = prose.replace(/(`+)[^`]*?\1/g, '')
  const prose = lines.join('\n')
  const links: MarkdownLink[] = []
  for (const match of prose.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
    const target = match[1]
    const line =
      prose.slice(0, match.index).split('\n').length +
      (match[0].slice(0, match[0].indexOf('](')).split('\n').length - 1)
    if (target !== undefined) links.push({ line, target })
  }
  return links
}

/** The first fenced block after the heading `heading` (its exact line), without its fences. */
export function blockAfter(text: string, heading: string): string {
  const lines = text.split('\n')
  const start = lines.indexOf(heading)
  if (start === -1) throw new Error(`no heading "${heading}"`)
  const open = lines.findIndex((line, index) => index > start && /^```/.test(line))
  const close = lines.findIndex((line, index) => index > open && /^```\s*$/.test(line))
  if (open === -1 || close === -1) throw new Error(`no fenced block after "${heading}"`)
  return lines.slice(open + 1, close).join('\n')
}

/** The rows of the first table whose header's first cell is `firstHeader`, as trimmed cells. */
export function tableRows(text: string, firstHeader: string): string[][] {
  const lines = text.split('\n')
  const cells = (line: string): string[] =>
    line
      .trim()
      .replace(/^\||\|$/g, '')
      .split('|')
      .map((cell) => cell.trim())
  const header = lines.findIndex((line) => line.startsWith('|') && cells(line)[0] === firstHeader)
  if (header === -1) throw new Error(`no table headed "${firstHeader}"`)
  const rows: string[][] = []
  for (const line of lines.slice(header + 2)) {
    if (!line.startsWith('|')) break
    rows.push(cells(line))
  }
  return rows
}
