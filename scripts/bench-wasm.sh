#!/usr/bin/env bash
# The wasm budget (BENCHMARKS.md, issue "Hardening"): what each screen
# fetches from /pkg before it is interactive, in Chromium, against the
# release build with the demo org. Builds the site as scripts/run.sh does
# (frontend/site --release: lazy routes split, optimised, precompressed)
# unless BENCH_NO_BUILD=1, then fails if any screen loads over 350 KB gzip.
# BENCH_SERVER names the server binary that serves it (default: the release
# build); the bytes a screen fetches do not depend on which build serves
# them, only on the site (CI serves the release site from its debug server).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export PATH="$HOME/.cargo/bin:${CLUTCHCALL_TOOLS_DIR:-$HOME/.cache/clutchcall-tools}/node_modules/.bin:$PATH"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
if [[ "${BENCH_NO_BUILD:-0}" != "1" ]]; then
  cargo run --quiet -p clutchcall-site -- --release
fi
source "$ROOT/scripts/serve-scratch.sh"
data="$(mktemp -d)"
serve_scratch "${BENCH_SERVER:-$TARGET_DIR/release/server}" "$data" CLUTCHCALL_METRICS_ADDR=off
cd end2end
BENCH_URL="http://127.0.0.1:$port" BENCH_SITE="$ROOT/target/site" \
  npx playwright test --config bench/playwright.bench.config.ts wasm-budget
