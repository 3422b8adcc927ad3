#!/usr/bin/env bash
# A three-broker KRaft Kafka cluster on loopback, without Docker, for the failover tests: three combined
# broker+controller nodes (a 3-voter quorum), each one a scripts/kafka.sh broker with its own run directory.
#
# Usage: scripts/kafka-cluster.sh VERB [ARGS]           BASE defaults to 39292
#   start        [BASE]     start the three members (ports BASE..BASE+2, controllers BASE+3..BASE+5) and wait
#                           until a topic with replication factor 3 can be created; writes the env file
#   stop         [BASE] [--clean]
#                           stop every member (by pid); --clean also deletes their data and the env file
#   kill         N [BASE]   SIGKILL member N (1-3): a broker crash; its data is kept
#   stop-member  N [BASE]   graceful stop of member N
#   start-member N [BASE]   start member N again (after kill/stop-member) and wait until all three serve
#   status       [BASE]     exit 0 when all three members run
# The env file .run/kafka-cluster-BASE.env exports KAFKA_BROKERS (the three addresses) and KAFKA_CLUSTER_BASE.
# Environment: KAFKA_CLUSTER_MEMBERS (members `start` starts, default "1 2 3"; the others join later with
# start-member, as a broker that registers late does); KAFKA_HEAP_OPTS (default -Xms128m -Xmx384m per member), KAFKA_READY_TIMEOUT (seconds, default 120);
# KAFKA_VERSION as for scripts/kafka.sh (default the pinned 4.x; KAFKA_VERSION=3.9.2 runs a 3.9 cluster).
set -euo pipefail

LOG_NAME=kafka-cluster
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
KAFKA="$ROOT/scripts/kafka.sh"
DEFAULT_BASE=39292
SIZE=3
export KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xms128m -Xmx384m}"
READY_TIMEOUT="${KAFKA_READY_TIMEOUT:-120}"

member_arg() {
  [[ "${1:-}" =~ ^[1-3]$ ]] || die "member must be 1, 2 or 3, not '${1:-}'"
  echo "$1"
}

state_dir() { echo "$ROOT/.run/kafka-cluster-$1"; }
env_file() { echo "$ROOT/.run/kafka-cluster-$1.env"; }
brokers() { echo "127.0.0.1:$1,127.0.0.1:$(($1 + 1)),127.0.0.1:$(($1 + 2))"; }

# The cluster id all members are formatted with; kept so that a restarted member rejoins the same cluster.
cluster_id() {
  local dir file
  dir="$(state_dir "$1")"
  file="$dir/cluster.id"
  mkdir -p "$dir"
  if [[ ! -s "$file" ]]; then
    # A Kafka Uuid: 16 random bytes, base64url; Kafka's own generator avoids a leading '-', so do we.
    node -e 'let s;do{s=require("crypto").randomBytes(16).toString("base64url")}while(s.startsWith("-"));console.log(s)' >"$file"
  fi
  cat "$file"
}

# Runs scripts/kafka.sh for member N with the settings that make it one voter of the cluster.
member() {
  local verb="$1" base="$2" n="$3"
  shift 3
  local voters="1@127.0.0.1:$((base + 3)),2@127.0.0.1:$((base + 4)),3@127.0.0.1:$((base + 5))"
  KAFKA_NODE_ID="$n" KAFKA_CONTROLLER_PORT="$((base + 2 + n))" KAFKA_QUORUM_VOTERS="$voters" \
    KAFKA_CLUSTER_ID="$(cluster_id "$base")" KAFKA_CLUSTER_SIZE="$SIZE" KAFKA_READY=no \
    bash "$KAFKA" "$verb" "$((base + n - 1))" "$@"
}

# Waits until a topic with as many copies as members run ($2, default all three) can be created.
wait_ready() {
  local base="$1" copies="${2:-$SIZE}"
  (cd "$ROOT" && "$ROOT/node_modules/.bin/tsx" scripts/kafka/ready.ts "$(brokers "$base")" "$READY_TIMEOUT" - "$copies")
}

start() {
  local base n pids=() failed=no started members
  base="$(base_arg "${1:-}")"
  read -r -a members <<<"${KAFKA_CLUSTER_MEMBERS:-1 2 3}"
  for n in "${members[@]}"; do member_arg "$n" >/dev/null; done
  started=$(date +%s%N)
  bash "$KAFKA" fetch
  cluster_id "$base" >/dev/null # once, before the members start in parallel and read it
  for n in "${members[@]}"; do
    member start "$base" "$n" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || failed=yes; done
  if [[ "$failed" == yes ]] || ! wait_ready "$base" "${#members[@]}"; then
    log "the cluster did not come up; stopping its members"
    stop "$base" no
    die "three-broker cluster on $base..$((base + 2)) failed to start (logs: .run/kafka-$base/logs/server.log and the next two ports)"
  fi
  printf 'export KAFKA_BROKERS=%s\nexport KAFKA_CLUSTER_BASE=%s\n' "$(brokers "$base")" "$base" >"$(env_file "$base")"
  log "ready: KAFKA_BROKERS=$(brokers "$base") after $((($(date +%s%N) - started) / 1000000)) ms (env: ${ROOT}/.run/kafka-cluster-$base.env)"
}

stop() {
  local base="$1" clean="$2" n pids=()
  for n in 1 2 3; do
    if [[ "$clean" == yes ]]; then member stop "$base" "$n" --clean &
    else member stop "$base" "$n" & fi
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || true; done
  if [[ "$clean" == yes ]]; then rm -rf "$(state_dir "$base")" "$(env_file "$base")"; fi
}

status() {
  local base="$1" n rc=0
  for n in 1 2 3; do bash "$KAFKA" status "$((base + n - 1))" || rc=3; done
  return "$rc"
}

verb="${1:-}"
shift || true
parse_clean "$@"
set -- "${ARGS[@]+"${ARGS[@]}"}"

case "$verb" in
  start) start "${1:-}" ;;
  stop) stop "$(base_arg "${1:-}")" "$CLEAN" ;;
  kill) member kill "$(base_arg "${2:-}")" "$(member_arg "${1:-}")" ;;
  stop-member) member stop "$(base_arg "${2:-}")" "$(member_arg "${1:-}")" ;;
  start-member)
    member start "$(base_arg "${2:-}")" "$(member_arg "${1:-}")"
    wait_ready "$(base_arg "${2:-}")"
    ;;
  status) status "$(base_arg "${1:-}")" ;;
  *) usage ;;
esac
