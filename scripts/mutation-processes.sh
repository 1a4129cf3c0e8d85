#!/usr/bin/env bash
# Mutation testing of the modules whose tests run the service as child processes (the syscall
# log of the durability test, the fsync-failing shim, racing lock holders, lingering sockets).
# Stryker's tap runner only runs a test file against the mutants that file's own process
# executed, so it never runs these tests against a mutant that only a child executes; the
# command runner runs the module's test list against every mutant, and the child processes
# inherit the active mutant through the environment. One Stryker run per module, so that each
# runs only its own tests; each JSON report is kept as reports/mutation/<module>.json.
#
# A module's tests run in stages, quickest first, and a mutant's run stops at the first stage
# that fails: most mutants are killed by the unit tests in a second or two, and only the few
# that survive them pay for the child processes. Each run is incremental: results are kept in
# mutation/<module>.json (committed) and only mutants whose code changed are run again;
# `--force` runs them all.
#
#   scripts/mutation-processes.sh [--force] [module]    e.g. store/atomic-write
set -euo pipefail
cd "$(dirname "$0")/.."

# The command Stryker runs for each mutant, in its sandbox: the stages of MUTATION_STAGES are
# separated by '|', the words of a stage are the arguments of one `node --test`.
if [[ ${1:-} == --run-stages ]]; then
  # Stryker makes its sandbox private; the lock's EPERM test runs a racer as nobody, who must read it.
  chmod go+rx .
  IFS='|' read -ra stages <<<"$MUTATION_STAGES"
  for stage in "${stages[@]}"; do
    # shellcheck disable=SC2086 # a stage is meant to split into words
    node --import tsx --test $stage
  done
  exit 0
fi

force=()
if [[ ${1:-} == --force ]]; then
  force=(--force)
  shift
fi
only=${1:-}

run() {
  local module=$1 stages=$2
  echo "== $module: $stages" >&2
  MUTATION_STAGES="$stages" npx stryker run stryker.processes.config.json --mutate "src/$module.ts" \
    --incremental --incrementalFile "mutation/$(basename "$module").json" "${force[@]}"
  mv reports/mutation/mutation.json "reports/mutation/$(basename "$module").json"
  # The kept results drop each mutant's test output (megabytes of it), which a re-run never reads.
  keep "mutation/$(basename "$module").json" drop-reasons
}

# Stryker writes the project's absolute path into its results (projectRoot, test output); the
# committed copies name paths from the project's root, so that they say nothing of the machine.
keep() {
  node -e '
    const fs = require("node:fs")
    const [file, mode] = process.argv.slice(1)
    const text = fs.readFileSync(file, "utf8")
    const results = JSON.parse(text)
    const indent = /\n( +)/.exec(text)?.[1].length ?? 1
    const root = process.cwd()
    results.projectRoot = "."
    for (const entry of Object.values(results.files)) for (const mutant of entry.mutants) {
      if (mode === "drop-reasons") delete mutant.statusReason
      else if (typeof mutant.statusReason === "string")
        mutant.statusReason = mutant.statusReason.split(root + "/").join("").split(root).join(".")
    }
    fs.writeFileSync(file, JSON.stringify(results, null, indent) + "\n")
  ' "$@"
}

# The in-process results (`stryker run`, before this script in `npm run test:mutation`).
if [[ -f mutation/in-process.json ]]; then
  keep mutation/in-process.json
fi

for entry in \
  "store/file/atomic-write|test/store/file/atomic-write.test.ts|test/store/storage-faults.test.ts|test/store/durability.test.ts" \
  "store/file/checkpoint|test/store/file/checkpoint.test.ts test/store/file/file-store.test.ts test/store/file/event-log.test.ts|test/store/wal-recovery.test.ts|test/store/durability.test.ts test/store/storage-faults.test.ts" \
  "store/file/replay|test/store/file/replay.test.ts|test/store/file/checkpoint.test.ts test/store/file/event-log.test.ts test/store/file/file-store.test.ts|test/store/wal-recovery.test.ts|test/store/storage-faults.test.ts" \
  "http/lingering-close|test/http/lingering-close.test.ts|test/api/lingering-close.test.ts" \
  "store/file/lock-file|--test-name-pattern=^DataDirLock$ test/store/file/data-dir-lock.test.ts|test/store/file/data-dir-lock.test.ts" \
  "store/file/data-dir-lock|--test-name-pattern=^DataDirLock$ test/store/file/data-dir-lock.test.ts|test/store/file/data-dir-lock.test.ts"; do
  module=${entry%%|*}
  if [[ -z $only || $only == "$module" ]]; then
    run "$module" "${entry#*|}"
  fi
done
