import { splitOutsideQuotes } from './field-values.js'

/** How an `Accept` field ranks one media type (RFC 9110 §12.5.1). */
export interface Preference {
  /** The weight (RFC 9110 §12.4.2) of the most specific range that matches: 0 when none does. */
  readonly weight: number
  /** True when that range is the media type itself, not `type/*` or `*\/*`. */
  readonly named: boolean
}

const QVALUE = /^(?:0(?:\.\d{0,3})?|1(?:\.0{0,3})?)$/

/**
 * The preference `accept` gives `mediaType` (lower case, `type/subtype`): the most specific
 * matching range wins (`type/subtype`, then `type/*`, then `*\/*`). A range whose weight is not a
 * qvalue is left out, as if it had not been sent.
 */
export function preferenceFor(accept: string, mediaType: string): Preference {
  const wildcard = `${mediaType.slice(0, mediaType.indexOf('/'))}/*`
  let specificity = -1
  let weight = 0
  for (const element of splitOutsideQuotes(accept, ',')) {
    const [range = '', ...parameters] = splitOutsideQuotes(element, ';')
    const name = range.trim().toLowerCase()
    const rank = name === mediaType ? 2 : name === wildcard ? 1 : name === '*/*' ? 0 : -1
    if (rank <= specificity) continue
    const q = weightOf(parameters)
    if (q === undefined) continue
    specificity = rank
    weight = q
  }
  return { weight, named: specificity === 2 }
}

/** The `q` parameter's value, 1 without one, undefined when it is not a qvalue. */
function weightOf(parameters: readonly string[]): number | undefined {
  for (const parameter of parameters) {
    const equals = parameter.indexOf('=')
    if (parameter.slice(0, equals).trim().toLowerCase() !== 'q') continue
    const text = parameter.slice(equals + 1).trim()
    return QVALUE.test(text) ? Number(text) : undefined
  }
  return 1
}
