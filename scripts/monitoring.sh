#!/usr/bin/env bash
# A Prometheus scraping the bridge with the shipped alert rules, and an Alertmanager sending every alert to a
# webhook, for tests and the demo. Both come from Debian's `prometheus` and `prometheus-alertmanager` packages.
#
# Usage: scripts/monitoring.sh VERB [NAME] [OPTIONS]      NAME (default: default) keys .run/monitoring-NAME/
#   start  [NAME] --targets HOST:PORT[,...] --webhook URL [--interval 15s] [--rules FILE] [--for-at-most DURATION]
#                 [--prometheus-port N] [--alertmanager-port N]
#                 start both (free ports unless given) and wait until they are ready; prints PROMETHEUS_URL=...
#                 and ALERTMANAGER_URL=... on stdout (also written to .run/monitoring-NAME/monitoring.env)
#   stop   [NAME] stop both by pid (SIGTERM, SIGKILL after 20 s), delete their data, keep configs and logs
#   status [NAME] exit 0 when both run (prints their URLs), 3 when not
#   install       install the Debian packages when missing (scripts/test.sh does, before the tests)
# --targets: the /metrics addresses of the bridge's replicas (job reviews-bridge). --webhook: the receiver every
# alert goes to. --interval: scrape and rule-evaluation interval, and Alertmanager's group wait (tests use 1s; the
# shipped deploy/prometheus/prometheus.yml says 15s). --rules: the rule file (default deploy/prometheus/alerts.yml).
# --for-at-most: caps every rule's `for` in the copy Prometheus loads (the demo: alerts fire within its minute);
# expressions, labels and annotations stay as written.
# The Prometheus configuration is derived from deploy/prometheus/prometheus.yml (scripts/monitoring-config.ts).
# Binaries: PROMETHEUS_BIN / ALERTMANAGER_BIN, else on PATH, else installed with apt-get (root on Debian; the
# packages' own services are not used: these servers run as the caller, on the ports chosen here).
set -euo pipefail

LOG_NAME=monitoring
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# Sets PROMETHEUS and ALERTMANAGER (PROMETHEUS_BIN / ALERTMANAGER_BIN when set), installing the Debian packages
# when missing. Debian's alertmanager reads its default template from the package's /usr/share path, so the
# package is installed rather than its binary copied.
ensure_installed() {
  if [[ -n "${PROMETHEUS_BIN:-}" ]]; then PROMETHEUS="$PROMETHEUS_BIN"; else
    ensure_tool prometheus prometheus
    PROMETHEUS="$(command -v prometheus)"
  fi
  if [[ -n "${ALERTMANAGER_BIN:-}" ]]; then ALERTMANAGER="$ALERTMANAGER_BIN"; else
    # Debian names the binary prometheus-alertmanager; an upstream install calls it alertmanager.
    if ! ALERTMANAGER="$(command -v alertmanager)"; then
      ensure_tool prometheus-alertmanager prometheus-alertmanager
      ALERTMANAGER="$(command -v prometheus-alertmanager)"
    fi
  fi
  [[ -x "$PROMETHEUS" ]] || die "PROMETHEUS_BIN=$PROMETHEUS is not executable"
  [[ -x "$ALERTMANAGER" ]] || die "ALERTMANAGER_BIN=$ALERTMANAGER is not executable"
}

name_arg() {
  local name="${1:-default}"
  [[ "$name" =~ ^[A-Za-z0-9_.-]+$ ]] || die "invalid name '$name' (letters, digits, . _ -)"
  echo "$name"
}

# Prints the pid when the pid file names a live server started with this run directory's configuration.
running_pid() { pid_of "$1/$2.pid" "$1/$2.yml"; }

ready() { curl -fs -o /dev/null --max-time 2 "$1/-/ready"; }

# Starts binary $3 as server $2 of run dir $1 with the remaining arguments; its log is $1/$2.log.
launch() {
  local run="$1" server="$2" bin="$3"
  shift 3
  # setsid: the server outlives this script and a Ctrl-C of the caller's terminal; stop is by pid.
  setsid "$bin" "$@" >"$run/$server.log" 2>&1 </dev/null &
  echo $! >"$run/$server.pid"
}

wait_ready() {
  local run="$1" server="$2" url="$3"
  if wait_until 600 ready "$url"; then return 0; fi
  log "---- last lines of $run/$server.log ----"
  tail -n 30 "$run/$server.log" >&2 2>/dev/null || true
  stop_all "$run"
  die "$server did not become ready at $url within 60 s"
}

stop_all() {
  local run="$1" server pid
  for server in prometheus alertmanager; do
    if pid="$(running_pid "$run" "$server")"; then
      log "stopping $server (pid $pid)"
      stop_pid "$pid" TERM 20
    fi
    rm -f "$run/$server.pid"
  done
  rm -rf "$run/prometheus-data" "$run/alertmanager-data"
}

start() {
  local name run targets="" webhook="" interval=15s rules="$ROOT/deploy/prometheus/alerts.yml" pport="" aport="" for_cap=""
  if [[ "${1:-}" == --* ]]; then name=default; else
    name="$(name_arg "${1:-}")"
    shift || true
  fi
  while (($# > 0)); do
    case "$1" in
      --targets) targets="${2:-}" ;;
      --webhook) webhook="${2:-}" ;;
      --interval) interval="${2:-}" ;;
      --rules) rules="${2:-}" ;;
      --for-at-most) for_cap="${2:-}" ;;
      --prometheus-port) pport="$(port_arg "${2:-}")" ;;
      --alertmanager-port) aport="$(port_arg "${2:-}")" ;;
      *) die "unknown option '$1' (see scripts/monitoring.sh without arguments)" ;;
    esac
    shift 2 || die "option $1 needs a value"
  done
  [[ -n "$targets" ]] || die "--targets host:port[,...] is required (the bridge replicas' /metrics addresses)"
  [[ -n "$webhook" ]] || die "--webhook URL is required (where Alertmanager sends the alerts)"
  [[ -f "$rules" ]] || die "rule file '$rules' not found"
  run="$ROOT/.run/monitoring-$name"
  if running_pid "$run" prometheus >/dev/null || running_pid "$run" alertmanager >/dev/null; then
    die "monitoring '$name' already runs (scripts/monitoring.sh stop $name first)"
  fi
  ensure_tool curl curl
  ensure_installed
  pport="${pport:-$(free_port)}"
  aport="${aport:-$(free_port)}"
  for port in "$pport" "$aport"; do
    if port_listening "$port"; then die "port $port is already in use ($(who_listens "$port"))"; fi
  done
  rm -rf "$run"
  mkdir -p "$run"
  local tsx=(node --import tsx "$ROOT/scripts/monitoring-config.ts")
  (cd "$ROOT" && "${tsx[@]}" rules --rules "$rules" --for-at-most "$for_cap" >"$run/alerts.yml") ||
    die "could not read the rules '$rules'"
  (cd "$ROOT" && "${tsx[@]}" prometheus --targets "$targets" --alertmanager "127.0.0.1:$aport" \
    --self "127.0.0.1:$pport" --interval "$interval" --rules alerts.yml >"$run/prometheus.yml") ||
    die "could not write the Prometheus configuration"
  (cd "$ROOT" && "${tsx[@]}" alertmanager --webhook "$webhook" --interval "$interval" >"$run/alertmanager.yml") ||
    die "could not write the Alertmanager configuration"

  # --cluster.listen-address= turns gossip off: a lone Alertmanager must not bind 0.0.0.0:9094.
  launch "$run" alertmanager "$ALERTMANAGER" --config.file="$run/alertmanager.yml" \
    --storage.path="$run/alertmanager-data" --web.listen-address="127.0.0.1:$aport" --cluster.listen-address=
  # Alerts are re-sent every interval, so a test sees a firing alert reach the webhook within seconds.
  launch "$run" prometheus "$PROMETHEUS" --config.file="$run/prometheus.yml" \
    --storage.tsdb.path="$run/prometheus-data" --web.listen-address="127.0.0.1:$pport" \
    --rules.alert.resend-delay="$interval" --web.enable-lifecycle
  wait_ready "$run" alertmanager "http://127.0.0.1:$aport"
  wait_ready "$run" prometheus "http://127.0.0.1:$pport"
  {
    echo "PROMETHEUS_URL=http://127.0.0.1:$pport"
    echo "ALERTMANAGER_URL=http://127.0.0.1:$aport"
  } >"$run/monitoring.env"
  log "ready: Prometheus http://127.0.0.1:$pport (pid $(cat "$run/prometheus.pid")), Alertmanager http://127.0.0.1:$aport (pid $(cat "$run/alertmanager.pid")); logs in ${run#"$ROOT"/}/"
  cat "$run/monitoring.env"
}

stop() {
  local name run
  name="$(name_arg "${1:-}")"
  run="$ROOT/.run/monitoring-$name"
  [[ -d "$run" ]] || {
    log "monitoring '$name' is not running"
    return 0
  }
  stop_all "$run"
  log "stopped '$name' (configs and logs kept in ${run#"$ROOT"/}/)"
}

status() {
  local name run up=0 server pid
  name="$(name_arg "${1:-}")"
  run="$ROOT/.run/monitoring-$name"
  for server in prometheus alertmanager; do
    if pid="$(running_pid "$run" "$server")"; then
      echo "$server: running, pid $pid"
      up=$((up + 1))
    else
      echo "$server: not running"
    fi
  done
  if ((up == 2)); then
    cat "$run/monitoring.env"
    return 0
  fi
  return 3
}

case "${1:-}" in
  start) start "${@:2}" ;;
  stop) stop "${2:-}" ;;
  status) status "${2:-}" ;;
  install)
    ensure_installed
    log "prometheus: $PROMETHEUS, alertmanager: $ALERTMANAGER"
    ;;
  *) usage ;;
esac
