/**
 * A small Prometheus registry: counters, gauges and histograms, rendered in the text exposition
 * format 0.0.4. Recording is a few additions on numbers kept in place; every label set becomes a
 * child once, with its rendered `{name="value"}` text, so nothing is built per observation.
 */

export const EXPOSITION_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8'

export type MetricType = 'counter' | 'gauge' | 'histogram'

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/

/** The samples of one family, rendered after its `# HELP` and `# TYPE` lines. */
interface Family {
  readonly name: string
  readonly help: string
  readonly type: MetricType
  render(out: string[]): void
}

export class CounterChild {
  value = 0
  readonly #labels: string

  constructor(labels: string) {
    this.#labels = labels
  }

  inc(by = 1): void {
    this.value += by
  }

  /** Mirrors a total counted elsewhere (CPU seconds, dropped lines): it only ever goes up. */
  setTotal(total: number): void {
    if (total > this.value) this.value = total
  }

  render(name: string, out: string[]): void {
    out.push(`${name}${this.#labels} ${formatValue(this.value)}\n`)
  }
}

export class GaugeChild {
  value = 0
  readonly #labels: string

  constructor(labels: string) {
    this.#labels = labels
  }

  set(value: number): void {
    this.value = value
  }

  inc(by = 1): void {
    this.value += by
  }

  dec(by = 1): void {
    this.value -= by
  }

  render(name: string, out: string[]): void {
    out.push(`${name}${this.#labels} ${formatValue(this.value)}\n`)
  }
}

export class HistogramChild {
  readonly #bounds: readonly number[]
  /** Per bucket, not cumulative: observe touches one slot; rendering adds them up. */
  readonly #counts: number[]
  #sum = 0
  #count = 0
  /** The label text of each `le` bucket, `{a="x",le="0.1"}`, built once. */
  readonly #bucketLabels: readonly string[]
  readonly #labels: string

  constructor(bounds: readonly number[], labels: string, labelPairs: string) {
    this.#bounds = bounds
    this.#counts = new Array<number>(bounds.length).fill(0)
    this.#labels = labels
    const prefix = labelPairs === '' ? '{' : `{${labelPairs},`
    this.#bucketLabels = [...bounds.map(formatValue), '+Inf'].map((le) => `${prefix}le="${le}"}`)
  }

  observe(value: number): void {
    const bounds = this.#bounds
    for (let i = 0; i < bounds.length; i += 1) {
      if (value <= (bounds[i] ?? Number.POSITIVE_INFINITY)) {
        this.#counts[i] = (this.#counts[i] ?? 0) + 1
        break
      }
    }
    this.#sum += value
    this.#count += 1
  }

  get count(): number {
    return this.#count
  }

  get sum(): number {
    return this.#sum
  }

  render(name: string, out: string[]): void {
    let cumulative = 0
    for (let i = 0; i < this.#counts.length; i += 1) {
      cumulative += this.#counts[i] ?? 0
      out.push(`${name}_bucket${this.#bucketLabels[i] ?? ''} ${cumulative}\n`)
    }
    out.push(`${name}_bucket${this.#bucketLabels[this.#counts.length] ?? ''} ${this.#count}\n`)
    out.push(`${name}_sum${this.#labels} ${formatValue(this.#sum)}\n`)
    out.push(`${name}_count${this.#labels} ${this.#count}\n`)
  }
}

/** A family whose children are made once per label set, on first use, and kept. */
class LabeledFamily<C extends { render(name: string, out: string[]): void }> implements Family {
  readonly name: string
  readonly help: string
  readonly type: MetricType
  readonly labelNames: readonly string[]
  readonly #make: (labels: string, pairs: string) => C
  readonly #children = new Map<string, C>()

  constructor(
    name: string,
    help: string,
    type: MetricType,
    labelNames: readonly string[],
    make: (labels: string, pairs: string) => C,
  ) {
    this.name = name
    this.help = help
    this.type = type
    this.labelNames = labelNames
    this.#make = make
    // A family without labels has exactly one child, shown (as 0) from the first scrape.
    if (labelNames.length === 0) this.labels()
  }

  /** The child for these label values, in the order of the label names; keep it for hot paths. */
  labels(...values: string[]): C {
    if (values.length !== this.labelNames.length) {
      throw new Error(
        `metric ${this.name}: expected ${this.labelNames.length} label values, got ${values.length}`,
      )
    }
    const key = values.join('\u0000')
    let child = this.#children.get(key)
    if (child === undefined) {
      const pairs = this.labelNames
        .map((label, i) => `${label}="${escapeLabelValue(values[i] ?? '')}"`)
        .join(',')
      child = this.#make(pairs === '' ? '' : `{${pairs}}`, pairs)
      this.#children.set(key, child)
    }
    return child
  }

  render(out: string[]): void {
    for (const child of this.#children.values()) child.render(this.name, out)
  }
}

export type Counter = LabeledFamily<CounterChild>
export type Gauge = LabeledFamily<GaugeChild>
export type Histogram = LabeledFamily<HistogramChild>

/** A set of families, rendered in the order they were registered. */
export class Registry {
  readonly #families: Family[] = []
  readonly #names = new Set<string>()
  readonly #collectors: (() => void)[] = []

  counter(name: string, help: string, labelNames: readonly string[] = []): Counter {
    return this.#add(
      new LabeledFamily(name, help, 'counter', labelNames, (labels) => new CounterChild(labels)),
    )
  }

  gauge(name: string, help: string, labelNames: readonly string[] = []): Gauge {
    return this.#add(
      new LabeledFamily(name, help, 'gauge', labelNames, (labels) => new GaugeChild(labels)),
    )
  }

  /** `bounds`: the upper bounds of the buckets, increasing; `+Inf` is added. */
  histogram(
    name: string,
    help: string,
    bounds: readonly number[],
    labelNames: readonly string[] = [],
  ): Histogram {
    if (labelNames.includes('le'))
      throw new Error(`metric ${name}: a histogram may not have a label named le`)
    if (
      bounds.length === 0 ||
      bounds.some(
        (bound, i) => !Number.isFinite(bound) || (i > 0 && bound <= (bounds[i - 1] ?? bound)),
      )
    ) {
      throw new Error(`metric ${name}: bucket bounds must be finite and increasing`)
    }
    const fixed = [...bounds]
    return this.#add(
      new LabeledFamily(
        name,
        help,
        'histogram',
        labelNames,
        (labels, pairs) => new HistogramChild(fixed, labels, pairs),
      ),
    )
  }

  /** Runs before every render: for gauges and totals read from elsewhere (memory, caches). */
  onCollect(collect: () => void): void {
    this.#collectors.push(collect)
  }

  render(): string {
    for (const collect of this.#collectors) collect()
    const out: string[] = []
    for (const family of this.#families) {
      out.push(
        `# HELP ${family.name} ${escapeHelp(family.help)}\n# TYPE ${family.name} ${family.type}\n`,
      )
      family.render(out)
    }
    return out.join('')
  }

  #add<F extends LabeledFamily<{ render(name: string, out: string[]): void }>>(family: F): F {
    if (!METRIC_NAME.test(family.name)) throw new Error(`metric name "${family.name}" is not valid`)
    if (this.#names.has(family.name)) throw new Error(`metric ${family.name} is registered twice`)
    for (const label of family.labelNames) {
      if (!LABEL_NAME.test(label) || label.startsWith('__'))
        throw new Error(`metric ${family.name}: label name "${label}" is not valid`)
    }
    this.#names.add(family.name)
    this.#families.push(family)
    return family
  }
}

/** A label value inside double quotes: backslash, double quote and line feed are escaped. */
export function escapeLabelValue(value: string): string {
  return /[\\"\n]/.test(value)
    ? value.replace(/[\\"\n]/g, (ch) => (ch === '\n' ? '\\n' : `\\${ch}`))
    : value
}

/** HELP text: backslash and line feed are escaped (a double quote is not). */
export function escapeHelp(help: string): string {
  return help.replace(/[\\\n]/g, (ch) => (ch === '\n' ? '\\n' : '\\\\'))
}

/** A sample value as Go's ParseFloat reads it: `+Inf`, `-Inf`, `NaN`, or a JavaScript number. */
export function formatValue(value: number): string {
  if (Number.isNaN(value)) return 'NaN'
  if (value === Number.POSITIVE_INFINITY) return '+Inf'
  if (value === Number.NEGATIVE_INFINITY) return '-Inf'
  return String(value)
}
