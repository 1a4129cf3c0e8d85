import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import {
  EXPOSITION_CONTENT_TYPE,
  escapeHelp,
  escapeLabelValue,
  formatValue,
  Registry,
} from '../../src/metrics/registry.js'
import { parseExposition, sampleValue } from './exposition.js'

const HOSTILE = [
  'back\\slash',
  'double "quote"',
  'line\nfeed',
  'all \\"\n three',
  'comma,brace} =x',
  'ünïcödé ✓',
  '',
]

describe('the metrics registry', () => {
  it('renders label values that round-trip through a strict parser, whatever they hold', () => {
    const registry = new Registry()
    const counter = registry.counter('test_things_total', 'Things.', ['what'])
    HOSTILE.forEach((value, i) => {
      counter.labels(value).inc(i + 1)
    })
    const families = parseExposition(registry.render())
    const samples = families.get('test_things_total')?.samples ?? []
    assert.deepEqual(
      samples.map((sample) => [sample.labels['what'], sample.value]),
      HOSTILE.map((value, i) => [value, i + 1]),
    )
  })

  it('escapes backslash, double quote and line feed in label values, and backslash and line feed in HELP', () => {
    assert.equal(escapeLabelValue('a\\b"c\nd'), 'a\\\\b\\"c\\nd')
    assert.equal(escapeLabelValue('plain'), 'plain')
    assert.equal(escapeHelp('a\\b"c\nd'), 'a\\\\b"c\\nd')
    const registry = new Registry()
    registry.gauge('test_gauge', 'Help with \\ a backslash,\na line feed and "quotes".')
    const text = registry.render()
    assert.match(
      text,
      /^# HELP test_gauge Help with \\\\ a backslash,\\na line feed and "quotes"\.\n# TYPE test_gauge gauge\ntest_gauge 0\n$/,
    )
    assert.equal(
      parseExposition(text).get('test_gauge')?.help,
      'Help with \\ a backslash,\na line feed and "quotes".',
    )
  })

  it('keeps histogram buckets cumulative, with le="+Inf" equal to _count, and a bound counting as inside its bucket', () => {
    const registry = new Registry()
    const histogram = registry.histogram(
      'test_seconds',
      'Durations.',
      [0.001, 0.01, 0.1],
      ['route'],
    )
    const child = histogram.labels('/a')
    for (const value of [0.0005, 0.001, 0.005, 0.01, 0.05, 2, 7]) child.observe(value)
    const families = parseExposition(registry.render())
    const bucket = (le: string): number | undefined =>
      sampleValue(families, 'test_seconds_bucket', { route: '/a', le })
    assert.deepEqual(['0.001', '0.01', '0.1', '+Inf'].map(bucket), [2, 4, 5, 7])
    assert.equal(sampleValue(families, 'test_seconds_count', { route: '/a' }), 7)
    assert.equal(
      sampleValue(families, 'test_seconds_sum', { route: '/a' }),
      0.0005 + 0.001 + 0.005 + 0.01 + 0.05 + 2 + 7,
    )
    assert.equal(child.count, 7)
  })

  it('shows a family without labels as 0 from the start, and a labelled one with no series as HELP and TYPE alone', () => {
    const registry = new Registry()
    registry.counter('test_plain_total', 'Plain.')
    registry.counter('test_labelled_total', 'Labelled.', ['a'])
    assert.equal(
      registry.render(),
      '# HELP test_plain_total Plain.\n# TYPE test_plain_total counter\ntest_plain_total 0\n' +
        '# HELP test_labelled_total Labelled.\n# TYPE test_labelled_total counter\n',
    )
  })

  it('mirrors totals counted elsewhere without ever going down, and runs collectors before each render', () => {
    const registry = new Registry()
    const total = registry.counter('test_mirrored_total', 'Mirrored.').labels()
    let source = 5
    registry.onCollect(() => {
      total.setTotal(source)
    })
    assert.equal(sampleValue(parseExposition(registry.render()), 'test_mirrored_total'), 5)
    source = 3
    assert.equal(sampleValue(parseExposition(registry.render()), 'test_mirrored_total'), 5)
    source = 9
    assert.equal(sampleValue(parseExposition(registry.render()), 'test_mirrored_total'), 9)
  })

  it('writes gauge values that Go reads: integers, decimals, exponents, +Inf, -Inf and NaN', () => {
    const registry = new Registry()
    const gauge = registry.gauge('test_values', 'Values.', ['v'])
    const values = [0, -3, 1.5, 1e-7, 2e21, Infinity, -Infinity, NaN]
    values.forEach((value, i) => {
      gauge.labels(String(i)).set(value)
    })
    gauge.labels('0').inc(2)
    gauge.labels('0').dec()
    const families = parseExposition(registry.render())
    assert.deepEqual(
      values.map((_value, i) => sampleValue(families, 'test_values', { v: String(i) })),
      [1, -3, 1.5, 1e-7, 2e21, Infinity, -Infinity, NaN],
    )
    assert.deepEqual([Infinity, -Infinity, NaN, 0.25].map(formatValue), [
      '+Inf',
      '-Inf',
      'NaN',
      '0.25',
    ])
    assert.equal(EXPOSITION_CONTENT_TYPE, 'text/plain; version=0.0.4; charset=utf-8')
  })

  it('refuses bad names, a name twice, a label named le on a histogram, bad buckets and a wrong number of label values', () => {
    const registry = new Registry()
    registry.counter('test_once_total', 'Once.')
    assert.throws(() => registry.counter('test_once_total', 'Again.'), /registered twice/)
    assert.throws(() => registry.gauge('1bad', 'Bad.'), /not valid/)
    assert.throws(() => registry.gauge('test_label', 'Bad label.', ['bad-label']), /label name/)
    assert.throws(
      () => registry.gauge('test_reserved', 'Reserved label.', ['__name']),
      /label name/,
    )
    assert.throws(() => registry.histogram('test_h1', 'H.', [1], ['le']), /le/)
    assert.throws(() => registry.histogram('test_h2', 'H.', [1, 1]), /increasing/)
    assert.throws(() => registry.histogram('test_h3', 'H.', []), /increasing/)
    assert.throws(() => registry.histogram('test_h4', 'H.', [1, Infinity]), /finite/)
    const labelled = registry.counter('test_two_total', 'Two labels.', ['a', 'b'])
    assert.throws(() => labelled.labels('only one'), /expected 2 label values/)
    assert.equal(labelled.labels('x', 'y'), labelled.labels('x', 'y'))
  })
})

describe('the strict exposition parser used by the tests', () => {
  const refuse = (text: string, why: RegExp): void => {
    assert.throws(() => parseExposition(text), why)
  }

  it('refuses samples of undeclared families, repeated HELP or TYPE, split families and stray comments', () => {
    refuse('a_total 1\n', /no declared family/)
    refuse('# HELP a x\n# HELP a y\n# TYPE a gauge\na 1\n', /second HELP/)
    refuse('# TYPE a gauge\n# TYPE a gauge\na 1\n', /second TYPE/)
    refuse('# TYPE a gauge\na 1\n# TYPE b gauge\nb 1\na{x="1"} 2\n', /two places/)
    refuse('# TYPE a gauge\n# just a comment\na 1\n', /neither HELP nor TYPE/)
    refuse('# TYPE a gauge\na 1', /line feed/)
    refuse('# TYPE a gauge\na 1\na 2\n', /twice/)
  })

  it('refuses bad escapes, bad values and bad label syntax', () => {
    refuse('# TYPE a gauge\na{x="\\t"} 1\n', /bad escape/)
    refuse('# TYPE a gauge\na{x="1"} one\n', /bad value/)
    refuse('# TYPE a gauge\na{x=1} 1\n', /=/)
    refuse('# TYPE a gauge\na{x="1" y="2"} 1\n', /comma/)
    refuse('# HELP a bad \\t escape\n# TYPE a gauge\na 1\n', /bad escape/)
    refuse('# TYPE a_total counter\na_total -1\n', /below 0/)
  })

  it('refuses histograms whose buckets are not cumulative, lack +Inf, or whose _count is not the +Inf bucket', () => {
    const head = '# TYPE h histogram\n'
    refuse(
      `${head}h_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n`,
      /not cumulative/,
    )
    refuse(`${head}h_bucket{le="1"} 1\nh_sum 1\nh_count 1\n`, /\+Inf/)
    refuse(`${head}h_bucket{le="1"} 1\nh_bucket{le="+Inf"} 2\nh_sum 1\nh_count 3\n`, /_count 3/)
    refuse(
      `${head}h_bucket{le="2"} 1\nh_bucket{le="1"} 1\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n`,
      /increasing/,
    )
    refuse(`${head}h_bucket{le="+Inf"} 1\nh_count 1\n`, /_sum/)
  })
})
