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

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEFAULT_PORT=36379

log() { printf 'redis: %s\n' "$*" >&2; }
die() {
  printf 'redis: ERROR: %s\n' "$*" >&2
  exit 1
}

port_arg() {
  local port="${1:-$DEFAULT_PORT}"
  [[ "$port" =~ ^[0-9]+$ && "$port" -ge 1 && "$port" -le 65535 ]] || die "invalid port '$port'"
  echo "$port"
}

port_listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

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
running_pid() {
  local run="$1" port="$2" pid
  [[ -f "$run/redis.pid" ]] || return 1
  pid="$(cat "$run/redis.pid")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "redis-server.*:$port" || return 1
  echo "$pid"
}

ensure_installed() {
  command -v redis-server >/dev/null && return 0
  log "redis-server not found; installing Debian's redis-server"
  [[ "$(id -u)" == 0 ]] || die "redis-server is missing and installing it needs root (apt-get install -y redis-server)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 || die "apt-get update failed"
  apt-get install -y -qq redis-server >&2 || die "apt-get install redis-server failed"
  command -v redis-server >/dev/null || die "redis-server still not found after installing it"
}

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
  for _ in $(seq 100); do
    if ping_ok "$port"; then
      pid="$(running_pid "$run" "$port")" || die "redis answers on $port but its pid file is missing"
      log "ready on redis://127.0.0.1:$port (pid $pid)"
      return 0
    fi
    sleep 0.1
  done
  tail -n 20 "$run/redis.log" >&2 2>/dev/null || true
  die "redis on port $port did not answer PING within 10 s"
}

stop() {
  local port run pid signal="${2:-TERM}"
  port="$(port_arg "${1:-}")"
  run="$ROOT/.run/redis-$port"
  if pid="$(running_pid "$run" "$port")"; then
    log "stopping pid $pid (port $port, SIG$signal)"
    kill "-$signal" "$pid" 2>/dev/null || true
    for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      log "pid $pid still alive after 20 s, sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
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
  *)
    sed -n '2,/^set -euo/{/^#/p}' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
