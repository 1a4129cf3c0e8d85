import assert from 'node:assert/strict'
import { readdirSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'

import ts from 'typescript'

import { readRepoFile } from '../helpers/markdown.js'
import { PROJECT_ROOT } from '../helpers/project-root.js'

/**
 * Every ```ts block of the README and docs/ is what a reader pastes into a project of theirs: it
 * must compile as it stands, with its own imports. Each block is compiled as a module of
 * examples/openapi-client/ (the one folder a block imports from relatively: `./typed-fetch.js`),
 * with the repository's compiler options (strict and more; unused names allowed, since a block
 * may show a value it does not use), and `user-service` resolved to the package's sources.
 */

interface Block {
  readonly name: string
  readonly code: string
}

/** The ```ts blocks of a Markdown text, each named by its document and first line. */
export function tsBlocksOf(document: string, text: string): Block[] {
  const blocks: Block[] = []
  const lines = text.split('\n')
  let start: number | undefined
  let fence = ''
  lines.forEach((line, index) => {
    if (start === undefined) {
      const open = /^(\s*)(`{3,})ts\s*$/.exec(line)
      if (open !== null) {
        start = index + 1
        fence = `${open[1] ?? ''}${open[2] ?? ''}`
      }
    } else if (line.trimEnd() === fence) {
      blocks.push({ name: `${document}:${start + 1}`, code: lines.slice(start, index).join('\n') })
      start = undefined
    }
  })
  return blocks
}

function documents(): string[] {
  const docs = readdirSync(path.join(PROJECT_ROOT, 'docs')).filter((name) => name.endsWith('.md'))
  return ['README.md', ...docs.sort().map((name) => `docs/${name}`)]
}

/** The compiler's complaints about `blocks`, each as `document:line: message`. */
function diagnosticsOf(blocks: readonly Block[]): string[] {
  const config = ts.readConfigFile(path.join(PROJECT_ROOT, 'tsconfig.json'), ts.sys.readFile)
  const { options } = ts.convertCompilerOptionsFromJson(
    {
      ...config.config.compilerOptions,
      noUnusedLocals: false,
      noUnusedParameters: false,
      typeRoots: [path.join(PROJECT_ROOT, 'node_modules', '@types')],
      paths: {
        'user-service': [path.join(PROJECT_ROOT, 'src', 'index.ts')],
        'user-service/testing': [path.join(PROJECT_ROOT, 'src', 'testing.ts')],
      },
    },
    PROJECT_ROOT,
  )
  const folder = path.join(PROJECT_ROOT, 'examples', 'openapi-client')
  const files = new Map(
    blocks.map((block, index) => [path.join(folder, `docs-block-${index}.ts`), block]),
  )
  const host = ts.createCompilerHost(options)
  const { fileExists, readFile, getSourceFile } = host
  host.fileExists = (file) => files.has(file) || fileExists(file)
  host.readFile = (file) => files.get(file)?.code ?? readFile(file)
  host.getSourceFile = (file, language, ...rest) => {
    const block = files.get(file)
    // A block with no import or export is still a module, as a file of an ES module project is.
    if (block !== undefined)
      return ts.createSourceFile(file, `${block.code}\nexport {}\n`, language)
    return getSourceFile(file, language, ...rest)
  }
  const program = ts.createProgram([...files.keys()], options, host)
  return ts.getPreEmitDiagnostics(program).map((diagnostic) => {
    const file = diagnostic.file?.fileName
    const block = file === undefined ? undefined : files.get(file)
    const where = block?.name ?? path.relative(PROJECT_ROOT, file ?? '(options)')
    const line =
      block !== undefined && diagnostic.start !== undefined && diagnostic.file !== undefined
        ? ` (block line ${diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start).line + 1})`
        : ''
    return `${where}${line}: ${ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n')}`
  })
}

describe('the TypeScript blocks of the README and docs/', () => {
  it('finds each ts block with its first line, and no other block', () => {
    const text = ['# T', '```ts', 'const a = 1', '```', '```sh', 'ls', '```', '```ts', 'x', '```']
    assert.deepEqual(tsBlocksOf('t.md', text.join('\n')), [
      { name: 't.md:3', code: 'const a = 1' },
      { name: 't.md:9', code: 'x' },
    ])
  })

  it('reports a block that names what it does not import, and one that breaks a type', () => {
    assert.deepEqual(
      diagnosticsOf([
        {
          name: 'a.md:1',
          code: "import { readFile } from 'node:fs/promises'\nawait readFile(token)",
        },
        { name: 'b.md:1', code: "const n: number = 'x'" },
      ]).map((line) => line.replace(/ \(block line \d+\):.*/, '')),
      ['a.md:1', 'b.md:1'],
    )
  })

  it('compile as they stand, each with its own imports', () => {
    const blocks = documents().flatMap((document) => tsBlocksOf(document, readRepoFile(document)))
    // The embedding examples and the typed client's: a page that loses them should say so here.
    assert.ok(blocks.length >= 3, `only ${blocks.length} ts blocks found`)
    assert.deepEqual(diagnosticsOf(blocks), [])
  })
})
