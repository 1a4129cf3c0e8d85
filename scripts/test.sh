#!/usr/bin/env bash
# npm test: the type check, then every test file, with c8's 90% line floor. The failed tests are
# listed once more after the coverage table (scripts/failure-summary.mjs), so the end of a long
# log, which is all some CI systems keep, says what failed.
set -uo pipefail
cd "$(dirname "$0")/.."

npm run -s typecheck || exit 1

# Without DATABASE_URL the PostgreSQL store and the cluster runner are not run, so not counted.
excluded=()
if [ -z "${DATABASE_URL:-}" ]; then
  excluded=(--exclude='src/store/postgres/**' --exclude=src/process/cluster.ts)
fi
# Node 20 cannot glob: node --test gets the explicit list. A file whose assertions bound a
# wall-clock time (a probe answered within 200 ms while the log replays) says so on a line
# `// npm test: alone` and runs after the others, one at a time: another file's load beside it
# would stretch its times, not the service's.
mapfile -t files < <(find test -name '*.test.ts' -not -path 'test/bench/*' -not -path 'test/container/*' | sort)
mapfile -t alone < <(grep -l '^// npm test: alone' "${files[@]}")
# The in-process files (scripts/in-process-tests.sh) run in one process, test/helpers/in-one-process.ts,
# one file among the others: in a process each, Node, tsx and the modules took them 2.5 times the
# CPU. The rest run a process per file: they start and kill children, and bound their times.
mapfile -t in_process < <(grep -L '^// npm test: alone' $(scripts/in-process-tests.sh))
mapfile -t together < <(grep -L '^// npm test: alone' "${files[@]}" | grep -vxF -f <(printf '%s\n' "${in_process[@]}"))
# The spec reporter for a person at a terminal, TAP for a log (node's own defaults).
reporter=tap
if [ -t 1 ]; then reporter=spec; fi
summary="$(mktemp "${TMPDIR:-/tmp}/failed-tests.XXXXXX")"
summary_alone="$(mktemp "${TMPDIR:-/tmp}/failed-tests.XXXXXX")"
trap 'rm -f "$summary" "$summary_alone"' EXIT

# Two test files at a time at least: most of a file's time is spent waiting on child processes,
# sockets and disks, and node's default (one fewer than the cores) runs one at a time on two
# cores, where the whole suite took 12.8 minutes against 9.1 with two (TEST_CONCURRENCY sets it).
concurrency="${TEST_CONCURRENCY:-$(node -p 'Math.max(2, require("node:os").availableParallelism() - 1)')}"

run_files() { # concurrency, failure summary file, test files…
  local files_at_once=$1 failures=$2
  shift 2
  node --import tsx --test --test-concurrency="$files_at_once" \
    --test-reporter="$reporter" --test-reporter-destination=stdout \
    --test-reporter=./scripts/failure-summary.mjs --test-reporter-destination="$failures" "$@"
}

# TEST_COVERAGE=off runs the same tests without c8: CI measures coverage once, on the floor Node,
# and runs the suite again on Node 26 without it. With it, every node process writes V8's
# coverage into coverage/tmp (as `c8 <command>` has it do) and `c8 report` reads both runs'.
coverage="${TEST_COVERAGE:-on}"
if [ "$coverage" != off ]; then
  rm -rf coverage/tmp
  mkdir -p coverage/tmp
  export NODE_V8_COVERAGE="$PWD/coverage/tmp"
fi
status=0
IN_PROCESS_TEST_FILES="$(printf '%s\n' "${in_process[@]}")" run_files "$concurrency" "$summary" \
  test/helpers/in-one-process.ts "${together[@]}" || status=1
if [ "${#alone[@]}" -gt 0 ]; then run_files 1 "$summary_alone" "${alone[@]}" || status=1; fi
if [ "$coverage" != off ]; then
  unset NODE_V8_COVERAGE
  # --exclude-after-remap: a child runs src/ compiled into node_modules/.cache
  # (test/helpers/child-scripts.ts); its coverage counts once mapped back to src/ by its maps.
  npx c8 report --temp-directory coverage/tmp --include 'src/**' "${excluded[@]}" --exclude-after-remap \
    --check-coverage --lines 90 --reporter=text-summary --reporter=text || status=1
fi
cat "$summary" "$summary_alone"
exit "$status"
