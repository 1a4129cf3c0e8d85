// The two container images, not a unit test: `node --import tsx test/bench/container.ts`
// (`npm run bench` runs it last; it says so in one line and exits 0 when no engine runs here).
// Builds both targets of the Dockerfile from the working tree with the engine the container test
// uses (podman, else docker), then for each: the image's size as the engine reports it, and
// BENCH_CONTAINER_RUNS times (default 7) the time from `run -d` (no configuration, a fresh named
// volume, read-only root) to the first 200 on /healthz through the published port, and the time
// `stop` takes; and of the start, the service's own part: from the process's start (the engine's
// State.StartedAt) to the time on its `listening` log line. Medians, with the smallest and
// largest. Images, containers and volumes are removed by name.
import { loadavg } from 'node:os'
import { performance } from 'node:perf_hooks'

import { findEngine, TARGETS, waitForHealthz } from '../container/engine.js'
import { PROJECT_ROOT } from '../helpers/child.js'

const RUNS = Number(process.env['BENCH_CONTAINER_RUNS'] ?? '7')
if (!Number.isInteger(RUNS) || RUNS < 1) {
  process.stderr.write(
    `BENCH_CONTAINER_RUNS must be a positive integer, got ${JSON.stringify(process.env['BENCH_CONTAINER_RUNS'])}\n`,
  )
  process.exit(1)
}

const log = (line: string): void => {
  process.stderr.write(`${line}\n`)
}
const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1
    ? (sorted[mid] ?? Number.NaN)
    : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2
}
const spread = (values: readonly number[]): string =>
  `${median(values).toFixed(0)} ms (${Math.min(...values).toFixed(0)}–${Math.max(...values).toFixed(0)})`

const engine = await findEngine()
if (typeof engine === 'string') {
  process.stdout.write(`container bench: ${engine}; skipped\n`)
  process.exit(0)
}

const rows: string[] = []
const made = { containers: [] as string[], volumes: [] as string[], images: [] as string[] }
const cleanup = (): Promise<void> => engine.remove(made)
process.once('SIGINT', () => {
  void cleanup().then(() => process.exit(130))
})

try {
  for (const target of TARGETS) {
    const image = `user-service-bench-${target.name}-${process.pid}`
    made.images.push(image)
    log(`${target.name}: building`)
    const since = performance.now()
    await engine.must(engine.buildArgs(image, target, PROJECT_ROOT), 900_000)
    log(
      `${target.name}: built in ${((performance.now() - since) / 1000).toFixed(1)} s (with the engine's build cache)`,
    )
    const size = Number(await engine.inspect(image, '{{.Size}}'))
    const ready: number[] = []
    const stops: number[] = []
    const own: number[] = []
    for (let run = 1; run <= RUNS; run += 1) {
      const name = `${image}-${run}`
      made.containers.push(name)
      made.volumes.push(name)
      const started = performance.now()
      const url = await engine.runDetached(name, name, image)
      ready.push(await waitForHealthz(url, started, 30_000))
      const startedAt = Date.parse(await engine.inspect(name, '{{.State.StartedAt}}'))
      const listening = /"time":"([^"]+)","level":"info","msg":"listening"/.exec(
        await engine.logs(name),
      )?.[1]
      if (listening === undefined || Number.isNaN(startedAt))
        throw new Error(`${name}: no listening line or start time`)
      own.push(Date.parse(listening) - startedAt)
      const stopping = performance.now()
      await engine.must(['stop', name])
      stops.push(performance.now() - stopping)
      await engine.remove({ containers: [name], volumes: [name] })
      log(
        `${target.name}: run ${run}: /healthz 200 after ${ready.at(-1)?.toFixed(0) ?? '?'} ms (the service ${own.at(-1)?.toFixed(0) ?? '?'} ms), stop ${stops.at(-1)?.toFixed(0) ?? '?'} ms`,
      )
    }
    rows.push(
      `| ${target.target === undefined ? '`docker build .` (Node 26 + user-service.mjs)' : '`--target binary` (single executable)'} | ${(size / 1e6).toFixed(1)} MB | ${spread(ready)} | ${spread(own)} | ${spread(stops)} |`,
    )
  }
} finally {
  await cleanup()
}

process.stdout.write(
  [
    `container images, ${engine.name}, ${RUNS} runs each, median (min–max), load average ${loadavg()
      .map((load) => load.toFixed(1))
      .join(' ')}:`,
    '',
    '| Image | Size | `run -d` to 200 on /healthz | process start to `listening` | `stop` |',
    '|---|---:|---:|---:|---:|',
    ...rows,
    '',
  ].join('\n'),
)
