import { readFileSync } from 'node:fs'

/** Resident set size of a process in MB (VmRSS from /proc/<pid>/status). */
export function readRssMb(pid: number): number {
  const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  if (match?.[1] === undefined) throw new Error(`no VmRSS for pid ${pid}`)
  return Number(match[1]) / 1024
}

/** CPU seconds (user + system) a process has used, from /proc/<pid>/stat (clock ticks of 1/100 s). */
export function readCpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  // The command name may hold spaces and parentheses: the fields start after its last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  const utime = Number(fields[11])
  const stime = Number(fields[12])
  if (!Number.isFinite(utime) || !Number.isFinite(stime))
    throw new Error(`no CPU times for pid ${pid}`)
  return (utime + stime) / 100
}

/** Samples a process's RSS every `everyMs` until stopped; gives the largest seen. */
export function sampleRss(pid: number, everyMs = 100): { stop(): number } {
  let max = readRssMb(pid)
  const timer = setInterval(() => {
    try {
      max = Math.max(max, readRssMb(pid))
    } catch {
      // The process ended: the largest value seen stands.
    }
  }, everyMs)
  return {
    stop() {
      clearInterval(timer)
      return max
    },
  }
}
