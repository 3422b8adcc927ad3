#!/usr/bin/env bash
# A throw-away Redis for tests and the demo, from Debian's redis-server (installed with apt-get when missing).
#
# Usage: scripts/redis.sh VERB [PORT]        PORT defaults to 36379 (127.0.0.1 only)
#   start  [PORT]   start a daemonized redis-server that keeps nothing on disk; no-op when already running
#   stop   [PORT]   stop it by pid (SIGTERM, SIGKILL after 20 s) and remove its run directory
#   kill   [PORT]   SIGKILL (crash simulation); the next start begins empty
#   status [PORT]   exit 0 when running (prints pid and URL), 3 when not
# Everything of one server lives in .run/redis-<PORT>/ (redis.pid, redis.log).
set -euo pipefail

LOG_NAME=redis DEFAULT_PORT=36379
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# PING over bash's /dev/tcp, so readiness does not depend on redis-cli being installed.
ping_ok() {
  local reply
  { exec 3<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || return 1
  printf 'PING\r\n' >&3
  read -r -t 2 reply <&3 || reply=""
  exec 3>&-
  [[ "$reply" == "+PONG"* ]]
}

# Prints the pid when the pid file names a live redis-server on this port (guards against a recycled pid).
running_pid() { pid_of "$1/redis.pid" "redis-server.*:$2"; }

ensure_installed() { ensure_tool redis-server redis-server; }

start() {
  local port run pid
  port="$(port_arg "${1:-}")"
  run="$ROOT/.run/redis-$port"
  if pid="$(running_pid "$run" "$port")"; then
    log "already running on 127.0.0.1:$port (pid $pid)"
    return 0
  fi
  if port_listening "$port"; then
    die "port $port is already in use and not by a redis of this project; choose another port (scripts/redis.sh start PORT)"
  fi
  ensure_installed
  rm -rf "$run"
  mkdir -p "$run"
  redis-server --daemonize yes --bind 127.0.0.1 --port "$port" --dir "$run" \
    --pidfile "$run/redis.pid" --logfile "$run/redis.log" --save "" --appendonly no ||
    die "redis-server failed to start (see $run/redis.log)"
  if wait_until 100 ping_ok "$port"; then
    pid="$(running_pid "$run" "$port")" || die "redis answers on $port but its pid file is missing"
    log "ready on redis://127.0.0.1:$port (pid $pid)"
    return 0
  fi
  tail -n 20 "$run/redis.log" >&2 2>/dev/null || true
  die "redis on port $port did not answer PING within 10 s"
}

stop() {
  local port run pid signal="${2:-TERM}"
  port="$(port_arg "${1:-}")"
  run="$ROOT/.run/redis-$port"
  if pid="$(running_pid "$run" "$port")"; then
    log "stopping pid $pid (port $port, SIG$signal)"
    stop_pid "$pid" "$signal" 20
    log "stopped (port $port)"
  else
    log "not running on port $port"
  fi
  # Nothing worth keeping: the server persists nothing (--save "" --appendonly no).
  rm -rf "$run"
}

status() {
  local port run pid
  port="$(port_arg "${1:-}")"
  run="$ROOT/.run/redis-$port"
  if pid="$(running_pid "$run" "$port")"; then
    echo "redis: running, pid $pid, redis://127.0.0.1:$port"
    return 0
  fi
  echo "redis: not running on port $port"
  return 3
}

case "${1:-}" in
  start) start "${2:-}" ;;
  stop) stop "${2:-}" ;;
  kill) stop "${2:-}" KILL ;;
  status) status "${2:-}" ;;
  *) usage ;;
esac
