#!/usr/bin/env bash
# npm test: the type check, then every test file under c8 with the 90% line floor. The failed tests
# are listed once more after the coverage table (scripts/failure-summary.mjs), so the end of a
# long log, which is all some CI systems keep, says what failed.
set -uo pipefail
cd "$(dirname "$0")/.."

npm run -s typecheck || exit 1

# Without DATABASE_URL the PostgreSQL store and the cluster runner are not run, so not counted.
excluded=()
if [ -z "${DATABASE_URL:-}" ]; then
  excluded=(--exclude='src/store/postgres/**' --exclude=src/process/cluster.ts)
fi
# Node 20 cannot glob: node --test gets the explicit list.
mapfile -t files < <(find test -name '*.test.ts' -not -path 'test/bench/*' -not -path 'test/container/*' | sort)
# The spec reporter for a person at a terminal, TAP for a log (node's own defaults).
reporter=tap
if [ -t 1 ]; then reporter=spec; fi
summary="$(mktemp "${TMPDIR:-/tmp}/failed-tests.XXXXXX")"
trap 'rm -f "$summary"' EXIT

# Two test files at a time at least: most of a file's time is spent waiting on child processes,
# sockets and disks, and node's default (one fewer than the cores) runs one at a time on two
# cores, where the whole suite took 12.8 minutes against 9.1 with two (TEST_CONCURRENCY sets it).
concurrency="${TEST_CONCURRENCY:-$(node -p 'Math.max(2, require("node:os").availableParallelism() - 1)')}"

# TEST_COVERAGE=off runs the same tests without c8: CI measures coverage once, on the floor Node,
# and runs the suite again on Node 26 without it.
coverage=(npx c8 --include 'src/**' "${excluded[@]}" --check-coverage --lines 90
  --reporter=text-summary --reporter=text)
if [ "${TEST_COVERAGE:-on}" = off ]; then coverage=(); fi

"${coverage[@]}" node --import tsx --test --test-concurrency="$concurrency" \
  --test-reporter="$reporter" --test-reporter-destination=stdout \
  --test-reporter=./scripts/failure-summary.mjs --test-reporter-destination="$summary" \
  "${files[@]}"
status=$?
cat "$summary"
exit "$status"
