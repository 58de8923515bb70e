#!/usr/bin/env bash
# Cluster mode on one machine (issue "Scale out"): three instances on
# http://127.0.0.1:3001, :3002 and :3003, sharing one PostgreSQL database
# (`clutchcall_cluster` on 127.0.0.1:5432, made if missing) and the NATS
# server on 127.0.0.1:4222 (setup installs and starts it where nothing
# answers). The first seeds the demo org on an empty database; each org is
# dispatched by whichever instance holds its lease, and any instance serves
# anyone. The fleet simulator is spread over the three: operators and the
# London robots on the first, us-east on the second, us-west on the third
# (Northstar's robots: the simulator drives the demo org's). The three share one data directory (`data/cluster`, as they
# would share a volume), so a session's recording and the datasets are
# whole whichever instance its robot's relay lands on. Put any round-robin
# load balancer in front of the three ports
# (README "Cluster mode"); kill one and watch its orgs move to another
# (`curl -s 127.0.0.1:910N/metrics | grep clutchcall_dispatching`).
set -euo pipefail
if ((BASH_VERSINFO[0] * 100 + BASH_VERSINFO[1] < 501)); then
  echo "cluster.sh needs bash 5.1 or later (wait -p); this is $BASH_VERSION" >&2
  exit 1
fi
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
CLUTCHCALL_SETUP_NATS=1 bash scripts/setup.sh

if ! (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; then
  echo "cluster mode needs PostgreSQL on 127.0.0.1:5432, and nothing answers there" >&2
  exit 1
fi
DB_NAME="${CLUTCHCALL_CLUSTER_DB:-clutchcall_cluster}"
PG_USER="${CLUTCHCALL_CLUSTER_PG_USER:-postgres}"
if ! psql -h 127.0.0.1 -U "$PG_USER" -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$DB_NAME'" | grep -q 1; then
  echo "creating the database $DB_NAME"
  psql -h 127.0.0.1 -U "$PG_USER" -d postgres -qc "CREATE DATABASE \"$DB_NAME\""
fi
export DATABASE_URL="postgres://$PG_USER@127.0.0.1:5432/$DB_NAME"
export CLUTCHCALL_NATS_URL="${CLUTCHCALL_NATS_URL:-nats://127.0.0.1:4222}"

# CLUTCHCALL_CLUSTER_PROFILE=debug uses the debug build (quicker to make).
PROFILE="${CLUTCHCALL_CLUSTER_PROFILE:-release}"
RELEASE=(); [[ "$PROFILE" == "release" ]] && RELEASE=(--release)
cargo run --quiet -p clutchcall-site -- "${RELEASE[@]}"

PIDS=()
# Whatever ends the script stops everything it started; Ctrl-C ends it.
trap 'kill "${PIDS[@]}" 2>/dev/null || true; pkill -P $$ 2>/dev/null || true' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
up() { for _ in $(seq 150); do curl -fs -o /dev/null "http://127.0.0.1:$1/healthz" && return 0; sleep 0.2; done; echo "instance on :$1 did not start" >&2; return 1; }
SERVERS=()
for n in 1 2 3; do
  CLUTCHCALL_ADDR="127.0.0.1:300$n" CLUTCHCALL_INSTANCE="node-$n" CLUTCHCALL_METRICS_ADDR="127.0.0.1:910$n" \
    CLUTCHCALL_DATA_DIR="data/cluster" CLUTCHCALL_DEMO=1 "$TARGET_DIR/$PROFILE/server" &
  PIDS+=($!); SERVERS+=($!)
  # The first seeds the demo org alone; the others find it there.
  up "300$n"
done
echo "three instances: http://127.0.0.1:3001 http://127.0.0.1:3002 http://127.0.0.1:3003 (metrics on :9101-:9103)"

if [[ "${CLUTCHCALL_SIM:-1}" != "0" ]]; then
  cargo build "${RELEASE[@]}" -p clutchcall-sim --quiet
  SIM="$TARGET_DIR/$PROFILE/clutchcall-sim"
  "$SIM" --base http://127.0.0.1:3001 --robots uk-pick-01,uk-pal-01,uk-insp-01,uk-mm-01,uk-weld-01 & PIDS+=($!)
  "$SIM" --base http://127.0.0.1:3002 --operators false --robots ue-pick-01,ue-pick-02,ue-pal-01,ue-insp-01 & PIDS+=($!)
  "$SIM" --base http://127.0.0.1:3003 --operators false --robots uw-pick-01,uw-pal-01,uw-mm-01,uw-weld-01 & PIDS+=($!)
fi
# Until Ctrl-C. An instance that exits (kill one to watch its orgs move)
# leaves the others serving, and is told when it does; this ends once all
# three have.
declare -A NODE=([${SERVERS[0]}]=1 [${SERVERS[1]}]=2 [${SERVERS[2]}]=3)
while ((${#NODE[@]})); do
  gone=""; status=0; wait -n -p gone "${!NODE[@]}" || status=$?
  if [[ -z "${gone:-}" ]]; then
    # One that exited before this loop (bash has already reaped it): found
    # by asking each whether it is still there.
    for pid in "${!NODE[@]}"; do kill -0 "$pid" 2>/dev/null || { gone=$pid; status=unknown; break; }; done
    [[ -n "${gone:-}" ]] || continue
  fi
  n=${NODE[$gone]}; unset "NODE[$gone]"
  echo "node-$n (:300$n) exited (status $status)" >&2
done
