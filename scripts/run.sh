#!/usr/bin/env bash
# Command 1: install what is missing, build, and serve ClutchCall on
# http://127.0.0.1:3000 with SQLite in ./data and the demo org, with the
# fleet simulator playing the demo org's robots and the operators nobody
# signs in as (CLUTCHCALL_SIM=0 turns it off).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
bash scripts/setup.sh
# Release build (frontend/site, the one site build): the server optimised
# for speed, the wasm for size, every screen its own chunks, precompressed.
cargo run --quiet -p clutchcall-site -- --release

ADDR="${CLUTCHCALL_ADDR:-127.0.0.1:3000}"
"$TARGET_DIR/release/server" &
SERVER=$!
SIM=""
if [[ "${CLUTCHCALL_SIM:-1}" != "0" ]]; then
  # The server serves while the simulator builds (on a cold machine its
  # first build takes about five minutes; later runs start it at once).
  # Asha and Dana are left to people (the README signs in as them).
  ( cargo build --release -p clutchcall-sim --quiet && exec "$TARGET_DIR/release/clutchcall-sim" --base "http://$ADDR" ) &
  SIM=$!
fi
trap 'kill $SERVER $SIM 2>/dev/null; pkill -P $$ 2>/dev/null || true' EXIT INT TERM
wait "$SERVER"
