#!/usr/bin/env bash
# The roster's keystroke benchmark (BENCHMARKS.md): seeds N operators
# (default 5,000) into a scratch SQLite database, serves them with the
# release build, and measures keystroke → updated rows in Chromium.
# Needs the release site and server, built as scripts/run.sh builds them
# (`cargo run -p clutchcall-site -- --release`), and scripts/setup.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export PATH="$HOME/.cargo/bin:${CLUTCHCALL_TOOLS_DIR:-$HOME/.cache/clutchcall-tools}/node_modules/.bin:$PATH"
N="${1:-5000}"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
cargo build --release -p clutchcall-bench --bin roster-seed
data="$(mktemp -d)"
"$TARGET_DIR/release/roster-seed" "$data" "$N"
source "$ROOT/scripts/serve-scratch.sh"
serve_scratch "$TARGET_DIR/release/server" "$data" CLUTCHCALL_DEMO=0 CLUTCHCALL_METRICS_ADDR=off
cd end2end
BENCH_URL="http://127.0.0.1:$port" npx playwright test --config bench/playwright.bench.config.ts
