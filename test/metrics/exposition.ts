// A strict reader of the Prometheus text exposition format 0.0.4, for tests: it throws on anything
// a scraper could misread, and checks what the format promises about families and histograms.

export interface Sample {
  readonly name: string
  readonly labels: Readonly<Record<string, string>>
  readonly value: number
}

export interface MetricFamily {
  readonly name: string
  readonly help: string
  readonly type: string
  readonly samples: Sample[]
}

const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*'
const HELP_LINE = new RegExp(`^# HELP (${NAME}) (.*)$`)
const TYPE_LINE = new RegExp(`^# TYPE (${NAME}) (counter|gauge|histogram|summary|untyped)$`)
const SAMPLE_HEAD = new RegExp(`^(${NAME})`)
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/
const VALUE = /^(?:[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]Inf|NaN)$/

/** Parses a whole exposition; throws with the line number on the first thing that is wrong. */
export function parseExposition(text: string): Map<string, MetricFamily> {
  if (text !== '' && !text.endsWith('\n'))
    throw new Error('the exposition does not end with a line feed')
  const families = new Map<string, MetricFamily>()
  const helps = new Map<string, string>()
  const finished = new Set<string>()
  const series = new Set<string>()
  let current: string | undefined
  const lines = text.split('\n').slice(0, -1)
  lines.forEach((line, index) => {
    const fail = (why: string): never => {
      throw new Error(`line ${index + 1}: ${why}: ${JSON.stringify(line)}`)
    }
    const enter = (name: string): void => {
      if (current !== name) {
        if (finished.has(name)) fail(`family ${name} appears in two places`)
        if (current !== undefined) finished.add(current)
        current = name
      }
    }
    if (line.startsWith('#')) {
      const help = HELP_LINE.exec(line)
      if (help !== null) {
        const [, name = '', raw = ''] = help
        if (helps.has(name)) fail(`second HELP for ${name}`)
        if (families.get(name)?.samples.length) fail(`HELP for ${name} after its samples`)
        enter(name)
        helps.set(name, unescapeHelp(raw, fail))
        return
      }
      const type = TYPE_LINE.exec(line)
      if (type !== null) {
        const [, name = '', kind = ''] = type
        if (families.has(name)) fail(`second TYPE for ${name}`)
        enter(name)
        families.set(name, { name, help: helps.get(name) ?? '', type: kind, samples: [] })
        return
      }
      fail('a comment that is neither HELP nor TYPE')
    }
    if (line === '') fail('an empty line')
    const sample = parseSample(line, fail)
    const family = familyOf(sample.name, families)
    if (family === undefined) fail(`sample ${sample.name} of no declared family`)
    else {
      enter(family.name)
      const key = `${sample.name}${JSON.stringify(Object.entries(sample.labels).sort())}`
      if (series.has(key)) fail('a series given twice')
      series.add(key)
      family.samples.push(sample)
    }
  })
  for (const [name, help] of helps) {
    const family = families.get(name)
    if (family === undefined) throw new Error(`HELP for ${name} without a TYPE`)
    families.set(name, { ...family, help })
  }
  for (const family of families.values()) checkFamily(family)
  return families
}

function familyOf(
  sampleName: string,
  families: Map<string, MetricFamily>,
): MetricFamily | undefined {
  const direct = families.get(sampleName)
  if (direct !== undefined && direct.type !== 'histogram') return direct
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (!sampleName.endsWith(suffix)) continue
    const family = families.get(sampleName.slice(0, -suffix.length))
    if (family?.type === 'histogram') return family
  }
  return undefined
}

function parseSample(line: string, fail: (why: string) => never): Sample {
  const head = SAMPLE_HEAD.exec(line)
  if (head?.[1] === undefined) return fail('no metric name')
  const name = head[1]
  let at = name.length
  const labels: Record<string, string> = {}
  if (line[at] === '{') {
    at += 1
    while (line[at] !== '}') {
      const label = LABEL_NAME.exec(line.slice(at))?.[0]
      if (label === undefined) return fail('a bad label name')
      if (label in labels) fail(`label ${label} twice`)
      at += label.length
      if (line.slice(at, at + 2) !== '="') fail('a label without ="')
      at += 2
      let value = ''
      for (;;) {
        const ch = line[at]
        if (ch === undefined) return fail('an unterminated label value')
        at += 1
        if (ch === '"') break
        if (ch !== '\\') {
          value += ch
          continue
        }
        const escaped = line[at]
        at += 1
        if (escaped === '\\') value += '\\'
        else if (escaped === '"') value += '"'
        else if (escaped === 'n') value += '\n'
        else fail(`a bad escape \\${String(escaped)} in a label value`)
      }
      labels[label] = value
      if (line[at] === ',') at += 1
      else if (line[at] !== '}') fail('labels not separated by a comma')
    }
    at += 1
  }
  if (line[at] !== ' ') fail('no space before the value')
  const [valueText = '', timestamp, ...rest] = line.slice(at + 1).split(' ')
  if (rest.length > 0 || (timestamp !== undefined && !/^-?\d+$/.test(timestamp)))
    fail('trailing text after the value')
  if (!VALUE.test(valueText)) fail(`a bad value ${valueText}`)
  return {
    name,
    labels,
    value: valueText.endsWith('Inf')
      ? valueText.startsWith('-')
        ? -Infinity
        : Infinity
      : Number(valueText),
  }
}

function unescapeHelp(raw: string, fail: (why: string) => never): string {
  return raw.replace(/\\(.?)/g, (_match, ch: string) => {
    if (ch === '\\') return '\\'
    if (ch === 'n') return '\n'
    return fail(`a bad escape \\${ch} in HELP`)
  })
}

/** Counters are never negative; a histogram has, per label set, cumulative buckets up to +Inf, a sum and a count equal to the +Inf bucket. */
function checkFamily(family: MetricFamily): void {
  const where = `family ${family.name}`
  if (family.type === 'counter') {
    for (const sample of family.samples) {
      if (!(sample.value >= 0)) throw new Error(`${where}: a counter below 0 or NaN`)
    }
  }
  if (family.type !== 'histogram') return
  const groups = new Map<string, { buckets: [number, number][]; sum?: number; count?: number }>()
  for (const sample of family.samples) {
    const { le, ...rest } = sample.labels
    const key = JSON.stringify(Object.entries(rest).sort())
    const group = groups.get(key) ?? { buckets: [] }
    groups.set(key, group)
    if (sample.name.endsWith('_bucket')) {
      if (le === undefined) throw new Error(`${where}: a bucket without le`)
      if (!VALUE.test(le)) throw new Error(`${where}: le="${le}" is not a number`)
      group.buckets.push([le === '+Inf' ? Infinity : Number(le), sample.value])
    } else {
      if (le !== undefined) throw new Error(`${where}: le on ${sample.name}`)
      if (sample.name.endsWith('_sum')) group.sum = sample.value
      else group.count = sample.value
    }
  }
  for (const [key, group] of groups) {
    const label = `${where} ${key}`
    if (group.buckets.length === 0) throw new Error(`${label}: no buckets`)
    for (let i = 1; i < group.buckets.length; i += 1) {
      const [prevLe = 0, prevCount = 0] = group.buckets[i - 1] ?? []
      const [le = 0, count = 0] = group.buckets[i] ?? []
      if (!(le > prevLe)) throw new Error(`${label}: buckets not in increasing le order`)
      if (count < prevCount) throw new Error(`${label}: bucket counts not cumulative`)
    }
    const last = group.buckets[group.buckets.length - 1]
    if (last?.[0] !== Infinity) throw new Error(`${label}: no le="+Inf" bucket last`)
    if (group.count === undefined || group.sum === undefined)
      throw new Error(`${label}: no _sum or _count`)
    if (group.count !== last[1])
      throw new Error(`${label}: _count ${group.count} is not the +Inf bucket ${last[1]}`)
  }
}

/** The value of the one sample with this name and these labels (all of them), or undefined. */
export function sampleValue(
  families: Map<string, MetricFamily>,
  name: string,
  labels: Readonly<Record<string, string>> = {},
): number | undefined {
  const wanted = JSON.stringify(Object.entries(labels).sort())
  for (const family of families.values()) {
    for (const sample of family.samples) {
      if (sample.name === name && JSON.stringify(Object.entries(sample.labels).sort()) === wanted)
        return sample.value
    }
  }
  return undefined
}
