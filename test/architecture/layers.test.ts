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
  ['service.ts', 'once.ts'],
  [
    'app.ts',
    'request-answer.ts',
    'request-record.ts',
    'request-idempotency.ts',
    'request-limits.ts',
    'request-state.ts',
  ],
  ['openapi/'],
  ['routes/'],
  // The import pipeline and the streaming of answers to slow clients, under the bulk routes.
  ['bulk/'],
  // The change feed's live streams (Server-Sent Events), under the route of GET /events.
  ['event-streams/'],
  ['ops/'],
  // Webhooks: the endpoints' rules and operations, and delivery.
  ['webhooks/'],
  ['users/'],
  ['store/'],
  [
    'settings-by-owner.ts',
    'settings.ts',
    'settings-traffic.ts',
    'setting-spec.ts',
    'setting-parsers.ts',
  ],
  ['auth/'],
  ['metrics/'],
  ['http/'],
  ['domain/'],
  ['log/'],
]

/**
 * Inside a folder of LAYERS, the same rule between its own parts, top to bottom: a module imports
 * only parts of its own layer or of a layer below it. Members are paths under src/; a module
 * belongs to the longest member that holds it (`routes/bulk/bulk-services.ts` before
 * `routes/bulk/`).
 */
const FOLDER_LAYERS: Readonly<Record<string, readonly (readonly string[])[]>> = {
  'routes/': [
    // The table of every route, in the order the OpenAPI document lists them.
    ['routes/route-list.ts'],
    // The Route values, one folder per resource (none imports another: see APART).
    [
      'routes/users/',
      'routes/bulk/',
      'routes/events/',
      'routes/webhooks/',
      'routes/service/',
      'routes/admin/',
    ],
    // What every route is made of: the Route type, the defaults each route spreads, the schemas
    // of parameters.
    ['routes/route.ts', 'routes/route-defaults.ts', 'routes/parameter-schemas.ts'],
    // What the handlers work with, and the bulk routes' part of it.
    ['routes/route-services.ts'],
    ['routes/bulk/bulk-services.ts'],
  ],
  'store/': [
    // Opens the store a configuration names, with the data directory's lock when it needs one.
    ['store/open-store.ts'],
    // Builds the store a configuration names.
    ['store/create-store.ts'],
    // The stores (none imports another: see APART).
    ['store/file/', 'store/postgres/', 'store/memory-store.ts'],
    // The index the in-process stores share, its parts, and the durability each is built with.
    ['store/indexed-store.ts'],
    [
      'store/change-commit.ts',
      'store/durability.ts',
      'store/user-index.ts',
      'store/per-key-queue.ts',
      'store/memory-keys.ts',
      'store/byte-lru.ts',
      'store/name-filter.ts',
      'store/memory-webhooks.ts',
      'store/upkeep-clock.ts',
    ],
    // The sorted id sets the index walks.
    ['store/sorted-ids.ts'],
    // The contract: what every store is, takes and throws (a failed durable write, the observer
    // of their timings included).
    [
      'store/store.ts',
      'store/kept-keys.ts',
      'store/webhook-store.ts',
      'store/webhook-input.ts',
      'store/store-errors.ts',
      'store/store-input.ts',
      'store/storage-unavailable.ts',
      'store/write-error.ts',
      'store/write-timing.ts',
    ],
    // The change feed every store keeps, which the contract names (Store.events).
    ['store/feed/'],
    // The feed's own contract: what a feed is and answers, its query and its page limit.
    ['store/event-feed.ts'],
  ],
}

/** Parts of one layer that know nothing of each other: each resource's routes, each store. */
const APART: readonly (readonly string[])[] = [
  [
    'routes/users/',
    'routes/bulk/',
    'routes/events/',
    'routes/webhooks/',
    'routes/service/',
    'routes/admin/',
  ],
  ['store/file/', 'store/postgres/', 'store/memory-store.ts'],
]

/**
 * What the rest of the service may import from store/: its contract, the modules a caller needs to
 * use any store (the Store interface and its types, the change feed's types and page limit, the
 * errors and input rules every store shares, the one storage_unavailable answer). Which store runs,
 * and how, is store/'s own business.
 */
const STORE_CONTRACT: readonly string[] = [
  'store/store.ts',
  'store/kept-keys.ts',
  'store/webhook-store.ts',
  'store/webhook-input.ts',
  'store/event-feed.ts',
  'store/store-errors.ts',
  'store/store-input.ts',
  'store/storage-unavailable.ts',
]

/** The folders that use a store and may import only its contract. */
const STORE_USERS: readonly string[] = [
  'users/',
  'webhooks/',
  'routes/',
  'bulk/',
  'event-streams/',
  'ops/',
]

/**
 * Arrows the order above lets through but the layout forbids: the user operations and the stores
 * know nothing of HTTP. They throw ServiceErrors, and routes/ and http/ make answers of them.
 */
const FORBIDDEN: readonly (readonly [from: string, to: string])[] = [
  ['users/', 'http/'],
  ['webhooks/', 'http/'],
  ['store/', 'http/'],
]

/** Whether a module (its path under src/, with `/`) is this entry: in the folder, or the file. */
function isIn(file: string, member: string): boolean {
  return member.endsWith('/') ? file.startsWith(member) : file === member
}

/** The layer of a module in an order, or -1 when none holds it; the longest member wins. */
function layerIn(order: readonly (readonly string[])[], file: string): number {
  let found = -1
  let length = 0
  order.forEach((members, layer) => {
    for (const member of members) {
      if (isIn(file, member) && member.length > length) {
        found = layer
        length = member.length
      }
    }
  })
  return found
}

/** The layer of a module, or -1 when none holds it. */
function layerOf(file: string): number {
  return layerIn(LAYERS, file)
}

/** The folder of FOLDER_LAYERS that holds both modules, if one does. */
function sharedFolder(file: string, target: string): string | undefined {
  return Object.keys(FOLDER_LAYERS).find((folder) => isIn(file, folder) && isIn(target, folder))
}

/** The member of an APART group that holds a module, with its group. */
function apartMember(file: string): [group: number, member: string] | undefined {
  for (const [group, members] of APART.entries()) {
    const member = members.find((candidate) => isIn(file, candidate))
    if (member !== undefined) return [group, member]
  }
  return undefined
}

function isWrong(file: string, target: string): boolean {
  const from = layerOf(file)
  const to = layerOf(target)
  if (from !== -1 && to !== -1 && to < from) return true
  if (FORBIDDEN.some(([source, sink]) => isIn(file, source) && isIn(target, sink))) return true
  const folder = sharedFolder(file, target)
  if (folder !== undefined) {
    const order = FOLDER_LAYERS[folder] ?? []
    const inner = layerIn(order, file)
    const innerTo = layerIn(order, target)
    if (inner !== -1 && innerTo !== -1 && innerTo < inner) return true
    const [group, member] = apartMember(file) ?? []
    const [groupTo, memberTo] = apartMember(target) ?? []
    if (group !== undefined && group === groupTo && member !== memberTo) return true
  }
  return (
    STORE_USERS.some((user) => isIn(file, user)) &&
    isIn(target, 'store/') &&
    !STORE_CONTRACT.includes(target)
  )
}

/**
 * The imports of src/ that point up the layers (or up a folder's own layers), that cross between
 * parts kept apart, that FORBIDDEN names, or that reach past the store's contract, as `from -> to`.
 */
export function wrongImports(imports: readonly (readonly [from: string, to: string])[]): string[] {
  return imports
    .filter(([file, target]) => isWrong(file, target))
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

/** Every import of src/, as `[from, to]`. */
function allImports(): (readonly [string, string])[] {
  return files.flatMap((file) =>
    importsOf(file, readFileSync(path.join(SRC, file), 'utf8')).map(
      (target) => [file, target] as const,
    ),
  )
}

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

  it('places every module of src/ in a layer, and every module of routes/ and store/ in one of theirs', () => {
    assert.ok(files.length > 50, `only ${files.length} modules found under ${SRC}`)
    assert.deepEqual(
      files.filter((file) => layerOf(file) === -1),
      [],
    )
    const unplaced = Object.entries(FOLDER_LAYERS).flatMap(([folder, order]) => {
      const inside = files.filter((file) => isIn(file, folder))
      assert.ok(inside.length > 5, `only ${inside.length} modules found in ${folder}`)
      return inside.filter((file) => layerIn(order, file) === -1)
    })
    assert.deepEqual(unplaced, [], 'place these modules in a layer of their FOLDER_LAYERS entry')
  })

  it('refuses an import that points up, and one of users/ or store/ into http/', () => {
    assert.deepEqual(
      wrongImports([
        ['routes/a.ts', 'users/b.ts'],
        ['users/a.ts', 'routes/b.ts'],
        ['routes/route-services.ts', 'event-streams/event-streams.ts'],
        ['event-streams/event-streams.ts', 'routes/events/event-query.ts'],
        ['event-streams/event-streams.ts', 'ops/shared-slots.ts'],
        ['users/a.ts', 'http/problem.ts'],
        ['store/file/a.ts', 'http/b.ts'],
        ['users/a.ts', 'store/store.ts'],
        ['routes/a.ts', 'http/b.ts'],
      ]),
      [
        'users/a.ts -> routes/b.ts',
        'event-streams/event-streams.ts -> routes/events/event-query.ts',
        'users/a.ts -> http/problem.ts',
        'store/file/a.ts -> http/b.ts',
      ],
    )
  })

  it('refuses an import that points up inside routes/ or store/, or between parts kept apart', () => {
    assert.deepEqual(
      wrongImports([
        ['routes/route.ts', 'routes/users/get-user.ts'],
        ['routes/route-defaults.ts', 'routes/route-list.ts'],
        ['routes/users/a.ts', 'routes/bulk/b.ts'],
        ['routes/service/a.ts', 'routes/events/b.ts'],
        ['routes/users/a.ts', 'routes/users/b.ts'],
        ['routes/users/a.ts', 'routes/route.ts'],
        ['routes/route-services.ts', 'routes/bulk/bulk-services.ts'],
        ['routes/bulk/bulk-services.ts', 'routes/bulk/export-users.ts'],
        ['store/store.ts', 'store/file/a.ts'],
        ['store/feed/a.ts', 'store/store.ts'],
        ['store/indexed-store.ts', 'store/memory-store.ts'],
        ['store/file/a.ts', 'store/postgres/b.ts'],
        ['store/memory-store.ts', 'store/file/a.ts'],
        ['store/file/a.ts', 'store/file/b.ts'],
        ['store/file/a.ts', 'store/indexed-store.ts'],
        ['store/postgres/a.ts', 'store/feed/b.ts'],
        ['store/create-store.ts', 'store/postgres/a.ts'],
      ]),
      [
        'routes/route.ts -> routes/users/get-user.ts',
        'routes/route-defaults.ts -> routes/route-list.ts',
        'routes/users/a.ts -> routes/bulk/b.ts',
        'routes/service/a.ts -> routes/events/b.ts',
        'routes/bulk/bulk-services.ts -> routes/bulk/export-users.ts',
        'store/store.ts -> store/file/a.ts',
        'store/feed/a.ts -> store/store.ts',
        'store/indexed-store.ts -> store/memory-store.ts',
        'store/file/a.ts -> store/postgres/b.ts',
        'store/memory-store.ts -> store/file/a.ts',
      ],
    )
  })

  it('lets users/, routes/, bulk/, event-streams/ and ops/ import only the contract of store/', () => {
    assert.deepEqual(
      wrongImports([
        ['users/a.ts', 'store/store.ts'],
        ['routes/users/a.ts', 'store/store-errors.ts'],
        ['ops/a.ts', 'store/storage-unavailable.ts'],
        ['routes/a.ts', 'store/store-input.ts'],
        ['users/a.ts', 'store/indexed-store.ts'],
        ['routes/events/a.ts', 'store/feed/journal.ts'],
        ['routes/events/a.ts', 'store/event-feed.ts'],
        ['ops/a.ts', 'store/file/file-store.ts'],
        ['routes/a.ts', 'store/postgres/b.ts'],
        ['bulk/a.ts', 'store/store.ts'],
        ['bulk/a.ts', 'store/memory-store.ts'],
        ['event-streams/a.ts', 'store/event-feed.ts'],
        ['event-streams/a.ts', 'store/feed/journal.ts'],
        ['process/a.ts', 'store/file/data-dir-lock.ts'],
      ]),
      [
        'users/a.ts -> store/indexed-store.ts',
        'routes/events/a.ts -> store/feed/journal.ts',
        'ops/a.ts -> store/file/file-store.ts',
        'routes/a.ts -> store/postgres/b.ts',
        'bulk/a.ts -> store/memory-store.ts',
        'event-streams/a.ts -> store/feed/journal.ts',
      ],
    )
  })

  it('has no import that points up or that the layout forbids', () => {
    assert.deepEqual(wrongImports(allImports()), [])
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
