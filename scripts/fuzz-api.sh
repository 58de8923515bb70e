#!/usr/bin/env bash
# Fuzzes the /v1 API from its own OpenAPI document with schemathesis: a
# fresh server with the demo org (debug build), a fixed seed and bounded
# examples, every check (no 5xx, status codes, content types and bodies as
# documented, valid data accepted, invalid refused). A few seconds.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS_DIR="${CLUTCHCALL_TOOLS_DIR:-$HOME/.cache/clutchcall-tools}"
BIN="${1:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/server}"

source "$ROOT/scripts/serve-scratch.sh"
data="$(mktemp -d)"
serve_scratch "$BIN" "$data" CLUTCHCALL_DEMO=1

"$TOOLS_DIR/venv/bin/st" --config-file "$ROOT/scripts/schemathesis.toml" run \
  "http://127.0.0.1:$port/v1/openapi.json" \
  -H "Authorization: Bearer cct_demo_ue-pick-01" \
  --checks all --seed 42 --max-examples 50 --workers 1 --no-color \
  --report junit --report-dir "$data/report"
