// A node:test reporter that lists only the failed tests, each with its file and the first lines of
// its error. scripts/test.sh (npm test) writes it to a file and prints it after the coverage
// table, so the end of a long CI log names what failed instead of ending on coverage figures.
// Plain JavaScript: node loads reporters before the tsx hooks are in place.

export default async function* failureSummary(source) {
  const failed = []
  for await (const event of source) {
    const failure = readFailure(event)
    if (failure !== undefined) failed.push(failure)
  }
  if (failed.length === 0) return
  yield `\nFailed tests (${failed.length}):\n`
  for (const { file, name, message } of failed) yield `✖ ${file} › ${name}\n${indent(message)}\n`
}

/** A test's own failure; undefined for other events and for a suite failed only by its tests. */
function readFailure(event) {
  if (event?.type !== 'test:fail') return undefined
  const { name, file, details } = event.data ?? {}
  const error = details?.error
  if (error?.failureType === 'subtestsFailed') return undefined
  return {
    file: typeof file === 'string' ? file : '(no file)',
    name: typeof name === 'string' ? name : '(no name)',
    message: describe(error?.cause ?? error),
  }
}

function describe(error) {
  const text = error instanceof Error ? (error.stack ?? error.message) : String(error)
  return text.split('\n').slice(0, 12).join('\n')
}

function indent(text) {
  return text.replace(/^/gm, '    ')
}
