/**
 * The process's own metric families, under the names Prometheus' client libraries give them
 * (process_*, nodejs_*): CPU, memory and the start time, read at each scrape.
 */
import type { Registry } from './registry.js'

/** Adds the families to a registry; they are read from the process at each collection. */
export function registerProcessMetrics(registry: Registry): void {
  const cpuUser = registry
    .counter('process_cpu_user_seconds_total', 'User CPU time spent by the process.')
    .labels()
  const cpuSystem = registry
    .counter('process_cpu_system_seconds_total', 'System CPU time spent by the process.')
    .labels()
  const cpuTotal = registry
    .counter('process_cpu_seconds_total', 'User and system CPU time spent by the process.')
    .labels()
  const rss = registry.gauge('process_resident_memory_bytes', 'Resident memory size.').labels()
  const startTime = registry
    .gauge('process_start_time_seconds', 'When the process started, in seconds since the epoch.')
    .labels()
  const heapUsed = registry.gauge('nodejs_heap_size_used_bytes', 'V8 heap in use.').labels()
  const heapTotal = registry.gauge('nodejs_heap_size_total_bytes', 'V8 heap reserved.').labels()
  const external = registry
    .gauge('nodejs_external_memory_bytes', 'Memory of C++ objects bound to JavaScript objects.')
    .labels()
  startTime.set(Math.round(Date.now() / 1000 - process.uptime()))
  registry.onCollect(() => {
    const cpu = process.cpuUsage()
    cpuUser.setTotal(cpu.user / 1e6)
    cpuSystem.setTotal(cpu.system / 1e6)
    cpuTotal.setTotal((cpu.user + cpu.system) / 1e6)
    const memory = process.memoryUsage()
    rss.set(memory.rss)
    heapUsed.set(memory.heapUsed)
    heapTotal.set(memory.heapTotal)
    external.set(memory.external)
  })
}
