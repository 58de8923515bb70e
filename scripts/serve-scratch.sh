# Sourced by the scripts that need a throwaway server (fuzz-api.sh and the
# browser benchmarks): `serve_scratch BIN DATA_DIR [VAR=value ...]` starts
# BIN on a free loopback port with its data in DATA_DIR (removed on exit),
# sets `port`, and returns once /healthz answers.
serve_scratch() {
  local bin="$1" dir="$2"
  shift 2
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  env CLUTCHCALL_ADDR="127.0.0.1:$port" CLUTCHCALL_DATA_DIR="$dir" RUST_LOG=warn \
    LEPTOS_SITE_ROOT="$ROOT/target/site" "$@" "$bin" >"$dir/server.log" 2>&1 &
  local server=$!
  trap "kill $server 2>/dev/null; rm -rf '$dir'" EXIT
  for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && return 0
    sleep 0.2
  done
  echo "the server on port $port never answered /healthz ($dir/server.log):" >&2
  cat "$dir/server.log" >&2
  return 1
}
