import { percentDecode } from '../../http/percent-decode.js'
import { badParameter } from '../../http/query-parameters.js'

/**
 * The export and the import take no query parameter: any one is a 400 naming it, as every list
 * does for a parameter it does not know, so that `?dryRun=1` is never taken for a dry run.
 */
export function refuseQueryParameters(rawQuery: string, of: string): void {
  for (const pair of rawQuery.split('&')) {
    if (pair === '') continue
    const eq = pair.indexOf('=')
    const rawName = eq === -1 ? pair : pair.slice(0, eq)
    const name = percentDecode(rawName, true)
    if (name === undefined) throw badParameter(rawName, 'is not valid percent-encoded UTF-8')
    throw badParameter(name, `is not a parameter of ${of}, which takes none`)
  }
}
