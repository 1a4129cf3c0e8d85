/** The parts of V8's `.cpuprofile` (node --cpu-prof) the profile scripts read. */

export interface CallFrame {
  functionName: string
  url: string
  lineNumber: number
}

export interface ProfileNode {
  id: number
  callFrame: CallFrame
  children?: number[]
}

export interface CpuProfile {
  nodes: ProfileNode[]
  startTime: number
  samples: number[]
  timeDeltas: number[]
}
