#!/usr/bin/env bash
# Installs what ClutchCall's build and tests need, and only what is missing.
# Idempotent: a second run checks versions and does nothing.
# The site is built by the workspace's own tool (frontend/site), which cargo
# builds like any crate; what it runs besides is binaryen and terser (npm
# packages, run in Node) and nothing from GitHub.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BINARYEN_VERSION="132.0.0"
TERSER_VERSION="5.51.4"
PLAYWRIGHT_VERSION="1.65.1"
PYARROW_VERSION="26.0.1"
SCHEMATHESIS_VERSION="4.32.5"
# Tools that live outside the clone so CI's fresh clones reuse them.
TOOLS_DIR="${CLUTCHCALL_TOOLS_DIR:-$HOME/.cache/clutchcall-tools}"

say() { printf '[setup] %s\n' "$*"; }

export PATH="$HOME/.cargo/bin:$TOOLS_DIR/node_modules/.bin:$PATH"

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  say "adding rust target wasm32-unknown-unknown"
  rustup target add wasm32-unknown-unknown
fi

# frontend/site/wasm-opt.mjs runs this package's library, not a wasm-opt on PATH.
if [[ "$(node -p "require('$TOOLS_DIR/node_modules/binaryen/package.json').version" 2>/dev/null || true)" != "$BINARYEN_VERSION" ]]; then
  say "installing binaryen $BINARYEN_VERSION (npm) into $TOOLS_DIR"
  mkdir -p "$TOOLS_DIR"
  npm install --prefix "$TOOLS_DIR" --no-audit --no-fund "binaryen@$BINARYEN_VERSION" >/dev/null
fi

# frontend/site/minify.mjs runs terser's library on the release scripts.
if [[ "$(node -p "require('$TOOLS_DIR/node_modules/terser/package.json').version" 2>/dev/null || true)" != "$TERSER_VERSION" ]]; then
  say "installing terser $TERSER_VERSION (npm) into $TOOLS_DIR"
  mkdir -p "$TOOLS_DIR"
  npm install --prefix "$TOOLS_DIR" --no-audit --no-fund "terser@$TERSER_VERSION" >/dev/null
fi

if [[ "$("$TOOLS_DIR/venv/bin/st" --version 2>/dev/null || true)" != *"$SCHEMATHESIS_VERSION"* ]]; then
  say "installing schemathesis $SCHEMATHESIS_VERSION (PyPI) into $TOOLS_DIR/venv"
  mkdir -p "$TOOLS_DIR"
  python3 -m venv "$TOOLS_DIR/venv"
  "$TOOLS_DIR/venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
fi

# pyarrow checks the LeRobot dataset exports (scripts/check_lerobot.py).
if ! "$TOOLS_DIR/venv/bin/python" -c "import pyarrow; assert pyarrow.__version__ == '$PYARROW_VERSION'" 2>/dev/null; then
  say "installing pyarrow $PYARROW_VERSION (PyPI) into $TOOLS_DIR/venv"
  "$TOOLS_DIR/venv/bin/pip" install --quiet --disable-pip-version-check "pyarrow==$PYARROW_VERSION"
fi

# Cluster mode's message bus (NATS with JetStream, on 127.0.0.1:4222), for
# those who ask (the tests: CLUTCHCALL_SETUP_NATS=1; command 1 needs none).
# Debian's nats-server is installed only when nothing answers there, and
# started only then.
nats_up() { (exec 3<>/dev/tcp/127.0.0.1/4222) 2>/dev/null; }
want_nats() { [[ "${CLUTCHCALL_SETUP_NATS:-0}" == "1" ]] && ! nats_up; }
need_apt=()
[[ -x /usr/bin/chromium ]] || need_apt+=(chromium)
want_nats && ! command -v nats-server >/dev/null && need_apt+=(nats-server)
if ((${#need_apt[@]})); then
  say "installing ${need_apt[*]} with apt"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
if want_nats; then
  say "starting nats-server on 127.0.0.1:4222 (JetStream on, store in $TOOLS_DIR/nats)"
  mkdir -p "$TOOLS_DIR/nats"
  nohup nats-server -a 127.0.0.1 -p 4222 -js -sd "$TOOLS_DIR/nats" >"$TOOLS_DIR/nats/server.log" 2>&1 &
  for _ in $(seq 50); do nats_up && break; sleep 0.1; done
  nats_up || { echo "nats-server did not start: see $TOOLS_DIR/nats/server.log" >&2; exit 1; }
fi

if [[ -f "$ROOT/end2end/package.json" ]]; then
  if [[ ! -d "$ROOT/end2end/node_modules/@playwright/test" ]] \
     || [[ "$(node -p "require('$ROOT/end2end/node_modules/@playwright/test/package.json').version" 2>/dev/null)" != "$PLAYWRIGHT_VERSION" ]]; then
    say "installing end2end npm packages (no browser download; Debian's chromium is used)"
    (cd "$ROOT/end2end" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund >/dev/null 2>&1 \
      || PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --no-audit --no-fund >/dev/null)
  fi
fi

say "tools ready: binaryen $BINARYEN_VERSION, terser $TERSER_VERSION, $(/usr/bin/chromium --version 2>/dev/null), schemathesis $("$TOOLS_DIR/venv/bin/st" --version | awk '{print $NF}')"
