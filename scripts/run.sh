#!/usr/bin/env bash
# Command 1: install what is missing, build, and serve ClutchCall on
# http://127.0.0.1:3000 with SQLite in ./data and the demo org.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
export PATH="$HOME/.cargo/bin:${CLUTCHCALL_TOOLS_DIR:-$HOME/.cache/clutchcall-tools}/node_modules/.bin:$PATH"
# Release build: the server optimised for speed, the wasm for size. Views
# are type-erased in release builds (server and browser alike, or hydration
# fails): the wasm is a quarter smaller. Debug builds stay unerased so that
# `cargo test -p server` and `cargo leptos build` share compiled dependencies.
export RUSTFLAGS="${RUSTFLAGS:-} --cfg erase_components"
exec cargo leptos serve --release
