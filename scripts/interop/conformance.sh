#!/usr/bin/env bash
# Run the official MCP conformance suite against `pve-steward demo` over streamable HTTP.
# Scenarios that need fixture tools/prompts/resources we deliberately do not ship are listed,
# with the reason, in conformance-baseline.yml; the run fails on any other failure.
# Usage: scripts/interop/conformance.sh [extra conformance args]   (after scripts/interop/setup.sh)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DIR=$ROOT/.interop
export PATH=$DIR/bin:$PATH HOME=$DIR/home
PORT=$("$ROOT/.venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
OUT=${CONFORMANCE_OUT:-$DIR/results/conformance}
rm -rf "$OUT"; mkdir -p "$OUT"
"$ROOT/.venv/bin/pve-steward" demo --http-port "$PORT" --state-dir "$OUT/state" > "$OUT/server.log" 2>&1 &
SPID=$!
trap 'kill $SPID 2>/dev/null; wait $SPID 2>/dev/null' EXIT
for _ in $(seq 100); do
  curl -s --max-time 1 -o /dev/null "http://127.0.0.1:$PORT/health" && break
  sleep 0.2
done
node "$DIR/node_modules/.bin/conformance" server --url "http://localhost:$PORT/mcp" --suite all \
  --expected-failures "$ROOT/scripts/interop/conformance-baseline.yml" -o "$OUT" "$@" > "$OUT/summary.txt" 2>&1
rc=$?
sed -n '/=== SUMMARY/,$p' "$OUT/summary.txt"
echo "conformance exit code: $rc"
exit $rc
