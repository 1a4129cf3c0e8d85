// The one-file bundles' dynamic imports, made static: an esbuild plugin for build-bundle.mjs and
// build-sea.mjs. The modules load a command's code (cli.ts), the OpenAPI document (service.ts) and
// the PostgreSQL store (create-store.ts) with import('./…') only when asked for. In a bundle that
// saves nothing, as every module is in the one file, and it costs: esbuild wraps each module an
// import() reaches (and each they import) in a lazy initialiser, whose constants become variables
// assigned later, which V8 does not fold. The request path ran 12% slower per request that way
// (docs/performance.md). Each `import('./x.js')` becomes a namespace imported at the top of its
// module, handed over as `Promise.resolve(namespace)`; the modules have no side effects at load.

import { readFile } from 'node:fs/promises'

// A literal relative specifier only: import(name) with a variable (the pg driver) stays dynamic.
const DYNAMIC_IMPORT = /\bimport\((['"])(\.{1,2}\/[^'"]+)\1\)/g

/** The source with its relative dynamic imports made static, or undefined if it has none. */
export function eagerSource(source) {
  const heads = []
  const contents = source.replace(DYNAMIC_IMPORT, (_match, _quote, specifier) => {
    const name = `__eager${heads.length}`
    heads.push(`import * as ${name} from ${JSON.stringify(specifier)}`)
    return `Promise.resolve(${name})`
  })
  // On the first line, so that the source map's lines stay those of the file.
  return heads.length === 0 ? undefined : `${heads.join('; ')}; ${contents}`
}

/** The esbuild plugin. */
export const eagerImports = {
  name: 'eager-imports',
  setup(build) {
    build.onLoad({ filter: /[\\/]src[\\/].*\.ts$/ }, async (args) => {
      const contents = eagerSource(await readFile(args.path, 'utf8'))
      return contents === undefined ? undefined : { contents, loader: 'ts' }
    })
  },
}
