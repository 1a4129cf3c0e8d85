#!/usr/bin/env bash
# Prints the in-process test files, one per line, sorted: those that start no child process, no
# PostgreSQL and no browser, known by what they import (node:child_process, playwright-core, and
# the helpers that start a service child, a measured child, a browser or a syscall shim, or that
# reach PostgreSQL). npm run test:fast runs them in one process (test/helpers/in-one-process.ts),
# and so does npm test, as one file beside the others.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -LE 'child_process|helpers/(child|measured-child|admin-browser|syscall-shim|postgres)\.js|playwright' \
  $(find test -name '*.test.ts' -not -path 'test/bench/*' -not -path 'test/container/*') | sort
