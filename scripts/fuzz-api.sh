#!/usr/bin/env bash
# Fuzzes the /v1 API from its own OpenAPI document with schemathesis: a
# fresh server with the demo org (debug build), a fixed seed and bounded
# examples, every check (no 5xx, status codes, content types and bodies as
# documented, valid data accepted, invalid refused). A few seconds.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS_DIR="${CLUTCHCALL_TOOLS_DIR:-$HOME/.cache/clutchcall-tools}"
BIN="${1:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/server}"

data="$(mktemp -d)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
CLUTCHCALL_ADDR="127.0.0.1:$port" CLUTCHCALL_DATA_DIR="$data" CLUTCHCALL_DEMO=1 RUST_LOG=warn \
  LEPTOS_SITE_ROOT="$ROOT/target/site" "$BIN" >"$data/server.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break
  sleep 0.2
done

"$TOOLS_DIR/venv/bin/st" --config-file "$ROOT/scripts/schemathesis.toml" run \
  "http://127.0.0.1:$port/v1/openapi.json" \
  -H "Authorization: Bearer cct_demo_ue-pick-01" \
  --checks all --seed 42 --max-examples 50 --workers 1 --no-color \
  --report junit --report-dir "$data/report"
