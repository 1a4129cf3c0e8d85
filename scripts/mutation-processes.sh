#!/usr/bin/env bash
# Mutation testing of the modules whose tests run the service as child processes (the syscall
# log of the durability test, the fsync-failing shim, racing lock holders, lingering sockets).
# Stryker's tap runner only runs a test file against the mutants that file's own process
# executed, so it never runs these tests against a mutant that only a child executes; the
# command runner runs the module's whole test list against every mutant, and the child processes
# inherit the active mutant through the environment. One Stryker run per module, so that each
# runs only its own tests; each JSON report is kept as reports/mutation/<module>.json.
set -euo pipefail
cd "$(dirname "$0")/.."

run() {
  local module=$1
  shift
  echo "== $module: $*" >&2
  MUTATION_TESTS="$*" npx stryker run stryker.processes.config.json --mutate "src/$module.ts"
  mv reports/mutation/mutation.json "reports/mutation/$(basename "$module").json"
}

only=${1:-}
for entry in \
  "store/file/atomic-write test/store/file/atomic-write.test.ts test/store/durability.test.ts test/store/storage-faults.test.ts" \
  "http/lingering-close test/http/lingering-close.test.ts test/api/lingering-close.test.ts" \
  "store/file/data-dir-lock test/store/file/data-dir-lock.test.ts"; do
  module=${entry%% *}
  if [[ -z $only || $only == "$module" ]]; then
    # shellcheck disable=SC2086 # the test list is meant to split into words
    run $entry
  fi
done
