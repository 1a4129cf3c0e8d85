import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'

const SRC = path.join(import.meta.dirname, '..', '..', 'src')

/**
 * The layers of src/, top to bottom (STYLE's layout): a module imports only modules of its own
 * layer or of a layer below it. Each entry is a folder (`process/`) or a file (`service.ts`).
 * The command's entry (bin.ts: the package's `bin` and the npm scripts run it) and the service's
 * own (main.ts: `node dist/main.js`) sit at the top with the package's entries.
 */
const LAYERS: readonly (readonly string[])[] = [
  ['index.ts', 'testing.ts', 'bin.ts', 'main.ts'],
  ['process/'],
  ['service.ts'],
  ['app.ts', 'request-state.ts'],
  ['openapi/'],
  ['routes/'],
  ['ops/'],
  ['users/'],
  ['store/'],
  ['settings.ts', 'setting-parsers.ts'],
  ['auth/'],
  ['metrics/'],
  ['http/'],
  ['domain/'],
  ['log/'],
]

/**
 * Arrows the order above lets through but the layout forbids: the user operations and the stores
 * know nothing of HTTP. They throw ServiceErrors, and routes/ and http/ make answers of them.
 */
const FORBIDDEN: readonly (readonly [from: string, to: string])[] = [
  ['users/', 'http/'],
  ['store/', 'http/'],
]

/** Whether a module (its path under src/, with `/`) is this entry: in the folder, or the file. */
function isIn(file: string, member: string): boolean {
  return member.endsWith('/') ? file.startsWith(member) : file === member
}

/** The layer of a module, or -1 when none holds it. */
function layerOf(file: string): number {
  return LAYERS.findIndex((members) => members.some((member) => isIn(file, member)))
}

/** The imports of src/ that point up the layers or that FORBIDDEN names, as `from -> to`. */
export function wrongImports(imports: readonly (readonly [from: string, to: string])[]): string[] {
  return imports
    .filter(([file, target]) => {
      const from = layerOf(file)
      const to = layerOf(target)
      if (from !== -1 && to !== -1 && to < from) return true
      return FORBIDDEN.some(([source, sink]) => isIn(file, source) && isIn(target, sink))
    })
    .map(([file, target]) => `${file} -> ${target}`)
}

function sourceFiles(dir: string, prefix = ''): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const relative = `${prefix}${entry.name}`
    if (entry.isDirectory()) return sourceFiles(path.join(dir, entry.name), `${relative}/`)
    return entry.name.endsWith('.ts') ? [relative] : []
  })
}

// `import … from 'x'`, `export … from 'x'`, `import 'x'` and `import('x')`, types included.
const IMPORT =
  /(?:^|[\s;])(?:import|export)\s[^'"`;]*?from\s*['"]([^'"]+)['"]|(?:^|[\s;])import\s*['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)/g

/** The modules of src/ a file imports, as paths under src/ (packages and node: left out). */
export function importsOf(file: string, text: string): string[] {
  const found: string[] = []
  for (const match of text.matchAll(IMPORT)) {
    const specifier = match[1] ?? match[2] ?? match[3]
    if (specifier === undefined || !specifier.startsWith('.')) continue
    const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), specifier))
    found.push(target.replace(/\.js$/, '.ts'))
  }
  return found
}

const files = sourceFiles(SRC)

describe('the layers of src/ (arrows point down)', () => {
  it('reads imports of every form', () => {
    const text = [
      "import { a } from './a.js'",
      "import type { B } from '../b/b.js'",
      "export { c } from './c.js'",
      "export * from './d.js'",
      "import './e.js'",
      "const f = await import('./f.js')",
      "import {\n  g,\n  h,\n} from './g.js'",
      "import path from 'node:path'",
    ].join('\n')
    assert.deepEqual(importsOf('routes/x.ts', text), [
      'routes/a.ts',
      'b/b.ts',
      'routes/c.ts',
      'routes/d.ts',
      'routes/e.ts',
      'routes/f.ts',
      'routes/g.ts',
    ])
  })

  it('places every module of src/ in a layer', () => {
    assert.ok(files.length > 50, `only ${files.length} modules found under ${SRC}`)
    assert.deepEqual(
      files.filter((file) => layerOf(file) === -1),
      [],
    )
  })

  it('refuses an import that points up, and one of users/ or store/ into http/', () => {
    assert.deepEqual(
      wrongImports([
        ['routes/a.ts', 'users/b.ts'],
        ['users/a.ts', 'routes/b.ts'],
        ['users/a.ts', 'http/problem.ts'],
        ['store/file/a.ts', 'http/b.ts'],
        ['users/a.ts', 'store/b.ts'],
        ['routes/a.ts', 'http/b.ts'],
      ]),
      [
        'users/a.ts -> routes/b.ts',
        'users/a.ts -> http/problem.ts',
        'store/file/a.ts -> http/b.ts',
      ],
    )
  })

  it('has no import that points up or that the layout forbids', () => {
    const imports = files.flatMap((file) =>
      importsOf(file, readFileSync(path.join(SRC, file), 'utf8')).map(
        (target) => [file, target] as const,
      ),
    )
    assert.deepEqual(wrongImports(imports), [])
  })

  it('resolves every import to a module of src/', () => {
    const known = new Set(files)
    const missing = files.flatMap((file) =>
      importsOf(file, readFileSync(path.join(SRC, file), 'utf8'))
        .filter((target) => !known.has(target))
        .map((target) => `${file} -> ${target}`),
    )
    assert.deepEqual(missing, [])
  })
})
