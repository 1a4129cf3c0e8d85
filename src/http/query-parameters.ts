import { percentDecode } from './percent-decode.js'
import { HttpError } from './problem.js'

/**
 * Reads a query string strictly (docs/api.md, listing): every name one of `known` (none for a route
 * that takes no parameter), none given twice, every value non-empty, all of it valid
 * percent-encoded UTF-8 (`+` is a space). Anything else is a 400 that names the parameter; `of`
 * says whose parameters they are ("this list", "the feed", "the import").
 */
export function readQueryParameters<P extends string>(
  rawQuery: string,
  known: readonly P[],
  of: string,
): Map<P, string> {
  const params = new Map<P, string>()
  for (const pair of rawQuery.split('&')) {
    if (pair === '') continue
    const eq = pair.indexOf('=')
    const rawName = eq === -1 ? pair : pair.slice(0, eq)
    const name = percentDecode(rawName, true)
    if (name === undefined) throw badParameter(rawName, 'is not valid percent-encoded UTF-8')
    const parameter = known.find((candidate) => candidate === name)
    if (parameter === undefined) {
      const use = known.length === 0 ? ', which takes none' : ` (use ${known.join(', ')})`
      throw badParameter(
        name === '' ? 'with an empty name' : name,
        `is not a parameter of ${of}${use}`,
      )
    }
    if (params.has(parameter)) throw badParameter(parameter, 'is given more than once')
    const value = percentDecode(eq === -1 ? '' : pair.slice(eq + 1), true)
    if (value === undefined) throw badParameter(parameter, 'is not valid percent-encoded UTF-8')
    if (value.trim() === '') throw badParameter(parameter, 'is empty')
    params.set(parameter, value)
  }
  return params
}

/** The 400 for a query parameter that is unknown, repeated or malformed. */
export function badParameter(name: string, problem: string): HttpError {
  return new HttpError('bad_request', `The query parameter ${name} ${problem}.`)
}
