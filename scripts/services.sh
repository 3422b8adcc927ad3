#!/usr/bin/env bash
# Kafka + Redis for tests and the demo, without Docker (scripts/kafka.sh, scripts/redis.sh).
#
# Usage: scripts/services.sh VERB
#   up      start Kafka (127.0.0.1:$KAFKA_PORT, default 39092) unless KAFKA_BROKERS is set, and Redis
#           (127.0.0.1:$REDIS_PORT, default 36379) unless REDIS_URL is set; a service already running on its
#           port is reused. Writes the env file (default .run/services.env):  source .run/services.env
#   down    stop only what `up` started (listed in the .owned file next to the env file), delete the env file
#   status  print the env file and whether each service runs
# Environment: SERVICES_ENV_FILE (default .run/services.env) names the env file, so two callers (a developer's
# long-lived services and scripts/test.sh) keep separate records of what each of them started.
set -euo pipefail

LOG_NAME=services
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ENV_FILE="${SERVICES_ENV_FILE:-$ROOT/.run/services.env}"
OWNED_FILE="${ENV_FILE%.env}.owned"
KAFKA_PORT="${KAFKA_PORT:-39092}"
REDIS_PORT="${REDIS_PORT:-36379}"

started_now=()
rollback() {
  local entry
  for entry in "${started_now[@]+"${started_now[@]}"}"; do
    # shellcheck disable=SC2086
    stop_entry $entry || true
    grep -vxF "$entry" "$OWNED_FILE" >"$OWNED_FILE.tmp" 2>/dev/null || true
    mv -f "$OWNED_FILE.tmp" "$OWNED_FILE"
  done
}

stop_entry() {
  case "$1" in
    kafka) bash "$ROOT/scripts/kafka.sh" stop "$2" --clean ;;
    redis) bash "$ROOT/scripts/redis.sh" stop "$2" ;;
    *) log "ignoring unknown entry '$*' in $OWNED_FILE" ;;
  esac
}

# Starts scripts/KIND.sh on PORT; records it as started by this call unless it was running already (then it is
# reused and left running by down).
start_owned() {
  local kind="$1" port="$2"
  if ! bash "$ROOT/scripts/$kind.sh" status "$port" >/dev/null; then
    started_now+=("$kind $port")
    echo "$kind $port" >>"$OWNED_FILE"
  else
    log "$kind: reusing the one already running on port $port"
  fi
  bash "$ROOT/scripts/$kind.sh" start "$port"
}

up() {
  mkdir -p "$(dirname "$ENV_FILE")"
  touch "$OWNED_FILE"
  trap 'log "start-up failed; stopping what this call started"; rollback' ERR
  local brokers redis_url
  if [[ -n "${KAFKA_BROKERS:-}" ]]; then
    brokers="$KAFKA_BROKERS"
    log "Kafka: using KAFKA_BROKERS=$brokers"
  else
    start_owned kafka "$KAFKA_PORT"
    brokers="127.0.0.1:$KAFKA_PORT"
  fi
  if [[ -n "${REDIS_URL:-}" ]]; then
    redis_url="$REDIS_URL"
    log "Redis: using REDIS_URL=$redis_url"
  else
    start_owned redis "$REDIS_PORT"
    redis_url="redis://127.0.0.1:$REDIS_PORT"
  fi
  trap - ERR
  cat >"$ENV_FILE" <<EOF
# Written by scripts/services.sh up; source it: . ${ENV_FILE#"$ROOT"/}
export KAFKA_BROKERS=$brokers
export REDIS_URL=$redis_url
EOF
  log "KAFKA_BROKERS=$brokers REDIS_URL=$redis_url (written to ${ENV_FILE#"$ROOT"/})"
}

down() {
  local kind port
  if [[ -f "$OWNED_FILE" ]]; then
    # Reverse order: the last started goes first.
    while read -r kind port; do
      [[ -n "$kind" ]] && stop_entry "$kind" "$port"
    done < <(tac "$OWNED_FILE")
  fi
  rm -f "$OWNED_FILE" "$ENV_FILE"
  log "down"
}

status() {
  if [[ -f "$ENV_FILE" ]]; then cat "$ENV_FILE"; else echo "no $ENV_FILE (run: scripts/services.sh up)"; fi
  bash "$ROOT/scripts/kafka.sh" status "$KAFKA_PORT" || true
  bash "$ROOT/scripts/redis.sh" status "$REDIS_PORT" || true
  if [[ -s "$OWNED_FILE" ]]; then echo "started by up (stopped by down): $(paste -sd, "$OWNED_FILE")"; fi
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  *) usage ;;
esac
