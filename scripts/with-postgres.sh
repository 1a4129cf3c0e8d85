#!/usr/bin/env bash
# Runs a command with DATABASE_URL pointing at a throwaway PostgreSQL cluster:
#   scripts/with-postgres.sh npm test
# The cluster lives in a temporary directory, listens on a spare local port and on a Unix socket
# in that directory, runs with fsync=off (it is thrown away), and is stopped and removed on exit.
# The command's exit code is this script's exit code. initdb refuses to run as root, so as root the
# cluster belongs to the `postgres` user (created by Debian's postgresql package).
set -euo pipefail

if [ "$#" -eq 0 ]; then
  echo "usage: $0 <command…>   (runs the command with DATABASE_URL set)" >&2
  exit 2
fi

find_bin() {
  # Debian's own server binaries first (newest version): a pg_ctl on the PATH may be a wrapper.
  local dir
  for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -x "$dir/pg_ctl" ] && [ -x "$dir/initdb" ] && [ -x "$dir/psql" ]; then echo "$dir"; return; fi
  done
  if command -v pg_ctl >/dev/null 2>&1 && command -v psql >/dev/null 2>&1; then dirname "$(command -v pg_ctl)"; return; fi
  echo "with-postgres: no PostgreSQL server found (apt-get install -y postgresql)" >&2
  exit 1
}
BIN="$(find_bin)"

ROOT="$(mktemp -d "${TMPDIR:-/tmp}/with-postgres.XXXXXX")"
chmod 755 "$ROOT"
DATA="$ROOT/data"
as_owner=()
if [ "$(id -u)" -eq 0 ]; then
  chown postgres "$ROOT"
  as_owner=(runuser -u postgres --)
fi

cleanup() {
  "${as_owner[@]}" "$BIN/pg_ctl" -D "$DATA" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$ROOT"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A spare port: ask the kernel for one, then let PostgreSQL take it.
PORT="$(node -e "const s=require('net').createServer();s.listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})")"

"${as_owner[@]}" "$BIN/initdb" -D "$DATA" -U postgres -A trust -E UTF8 --locale=C >"$ROOT/initdb.log" 2>&1 \
  || { cat "$ROOT/initdb.log" >&2; exit 1; }
"${as_owner[@]}" "$BIN/pg_ctl" -D "$DATA" -l "$ROOT/server.log" -w -t 30 \
  -o "-p $PORT -h 127.0.0.1 -k $ROOT -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300" \
  start >/dev/null || { cat "$ROOT/server.log" >&2; exit 1; }
"$BIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -qAt -v ON_ERROR_STOP=1 -c 'CREATE DATABASE user_service' >/dev/null

export DATABASE_URL="postgres://postgres@127.0.0.1:$PORT/user_service"
export PATH="$BIN:$PATH"
echo "with-postgres: PostgreSQL $("$BIN/postgres" --version | awk '{print $3}') at $DATABASE_URL" >&2

set +e
"$@"
status=$?
set -e
exit "$status"
