import { readQueryParameters } from '../../http/query-parameters.js'

/**
 * The export and the import take no query parameter: any one is a 400 naming it, as every list
 * does for a parameter it does not know, so that `?dryRun=1` is never taken for a dry run.
 */
export function refuseQueryParameters(rawQuery: string, of: string): void {
  readQueryParameters(rawQuery, [], of)
}
