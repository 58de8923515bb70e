# Sourced by the project's commands (run.sh, test.sh, cluster.sh): works
# from the checkout's root, puts the tools setup.sh installed on PATH, and
# names where cargo builds (TARGET_DIR).
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export PATH="$HOME/.cargo/bin:${CLUTCHCALL_TOOLS_DIR:-$HOME/.cache/clutchcall-tools}/node_modules/.bin:$PATH"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
