#!/usr/bin/env bash
# A real schema registry (Apicurio Registry, in memory) without Docker, for tests and the demo. The prebuilt
# Quarkus application comes from Maven Central (scripts/registry/pom.xml), cached under .cache/ (git-ignored).
# It serves the Confluent-compatible API under http://127.0.0.1:PORT/apis/ccompat/v7 (what SCHEMA_REGISTRY_URL
# names) and its health on the Quarkus management port (a free port, kept in the run directory).
#
# Usage: scripts/registry.sh VERB [PORT]        PORT defaults to 38081 (127.0.0.1 only)
#   fetch             copy and unpack the application into .cache/registry/<version>/ (no-op when complete)
#   start   [PORT]    start a registry and wait until its readiness check is UP; no-op when already running
#   stop    [PORT]    stop it (SIGTERM, SIGKILL after 20 s) and remove its run directory (the data is in memory)
#   status  [PORT]    exit 0 when running (prints pid and URL), 3 when not
#   logs    [PORT]    print the tail of its log
# Everything of one registry lives in .run/registry-<PORT>/ (registry.pid, management.port, registry.log).
# Environment: REGISTRY_JAVA (a java of version 21 or later; default: the first found of JAVA_HOME, java on the
# PATH, /usr/lib/jvm/*), REGISTRY_READY_TIMEOUT (seconds, default 90), REGISTRY_HEAP_OPTS.
set -euo pipefail

LOG_NAME=registry DEFAULT_PORT=38081
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
POM="$ROOT/scripts/registry/pom.xml"
REGISTRY_VERSION="$(sed -n 's:.*<registry.version>\(.*\)</registry.version>.*:\1:p' "$POM")"
CACHE_DIR="$ROOT/.cache/registry/$REGISTRY_VERSION"
APP="$CACHE_DIR/app"
M2_REPO="$ROOT/.cache/m2"
READY_TIMEOUT="${REGISTRY_READY_TIMEOUT:-90}"

# The pom's checksum marks a complete fetch, so an interrupted unpack or a changed pom fetches again.
pom_stamp() { sha256sum "$POM" | cut -d' ' -f1; }

fetch() {
  local stamp
  stamp="$(pom_stamp)"
  if [[ -f "$CACHE_DIR/.complete" && "$(cat "$CACHE_DIR/.complete")" == "$stamp" ]]; then
    log "using cached Apicurio Registry $REGISTRY_VERSION ($APP)"
    return 0
  fi
  ensure_tool java openjdk-17-jre-headless
  ensure_tool mvn maven
  log "fetching Apicurio Registry $REGISTRY_VERSION from Maven Central into $APP"
  rm -rf "$APP" "$CACHE_DIR/.complete" "$CACHE_DIR/download"
  mkdir -p "$APP" "$CACHE_DIR/download" "$M2_REPO"
  if ! mvn -q -B -Dstyle.color=never -f "$POM" -Dmaven.repo.local="$M2_REPO" \
    dependency:copy -DoutputDirectory="$CACHE_DIR/download" >"$CACHE_DIR/fetch.log" 2>&1; then
    cat "$CACHE_DIR/fetch.log" >&2
    die "maven could not fetch the registry (output above)"
  fi
  tar -xzf "$CACHE_DIR/download/apicurio-registry-app.tar.gz" -C "$APP" || die "cannot unpack the registry archive"
  # The archive stays in the Maven cache: one copy is enough here.
  rm -rf "$CACHE_DIR/download"
  [[ -f "$APP/quarkus-run.jar" ]] || die "fetch finished but quarkus-run.jar is missing"
  echo "$stamp" >"$CACHE_DIR/.complete"
  log "fetched and unpacked ($(du -sh "$APP" | cut -f1))"
}

# The major version of a java binary (17, 21, 25...), empty when it does not run.
java_major() { "$1" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1; }

# A java of version 21 or later (Quarkus 3.3x needs it); the machine's default may be older (Kafka runs on 17).
find_java() {
  local candidate major
  for candidate in "${REGISTRY_JAVA:-}" "${JAVA_HOME:+$JAVA_HOME/bin/java}" "$(command -v java || true)" /usr/lib/jvm/*/bin/java; do
    [[ -n "$candidate" && -x "$candidate" ]] || continue
    major="$(java_major "$candidate")"
    if [[ -n "$major" && "$major" -ge 21 ]]; then
      echo "$candidate"
      return 0
    fi
  done
  return 1
}

# Prints the pid when the pid file names a live registry of this run dir (guards against a recycled pid).
running_pid() { pid_of "$1/registry.pid" "quarkus.http.port=$2 "; }

ready() { curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$1/health/ready"; }

start() {
  local port run pid java mport started
  port="$(port_arg "${1:-}")"
  run="$ROOT/.run/registry-$port"
  if pid="$(running_pid "$run" "$port")"; then
    log "already running on 127.0.0.1:$port (pid $pid)"
    return 0
  fi
  if port_listening "$port"; then
    local owner
    owner="$(who_listens "$port")"
    die "port $port is already in use${owner:+ by $owner} and not by a registry of this project; choose another port (scripts/registry.sh start PORT)"
  fi
  fetch
  java="$(find_java)" || die "Apicurio Registry needs Java 21 or later: none found (set REGISTRY_JAVA or install openjdk-21-jre-headless)"
  ensure_tool curl curl
  rm -rf "$run"
  mkdir -p "$run"
  mport="$(free_port)"
  echo "$mport" >"$run/management.port"
  local heap="${REGISTRY_HEAP_OPTS:--Xms64m -Xmx384m}"
  started=$(date +%s%N)
  # setsid: the registry outlives the caller's process group (like the test broker); C1 only and SerialGC start
  # fastest on 2 cores. The inner bash records its pid and becomes java, so the pid file names the JVM.
  # shellcheck disable=SC2086,SC2016
  setsid bash -c 'echo $$ >"$1/registry.pid"; shift; exec "$@"' _ "$run" \
    "$java" $heap -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:+ExitOnOutOfMemoryError \
    -Dquarkus.http.host=127.0.0.1 -Dquarkus.http.port="$port" -Dquarkus.management.host=127.0.0.1 \
    -Dquarkus.management.port="$mport" -Dquarkus.log.console.color=false -Dquarkus.otel.enabled=false \
    -jar "$APP/quarkus-run.jar" </dev/null >"$run/registry.log" 2>&1 &
  wait_until 50 test -s "$run/registry.pid" || die "registry did not start (no pid file)"
  pid="$(cat "$run/registry.pid")"
  log "started Apicurio Registry $REGISTRY_VERSION pid $pid on 127.0.0.1:$port (management $mport, $java); waiting until ready"
  if ! wait_until $((READY_TIMEOUT * 10)) eval "ready $mport || ! kill -0 $pid 2>/dev/null" || ! ready "$mport"; then
    tail -n 30 "$run/registry.log" >&2 || true
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$run/registry.pid"
    die "registry on port $port did not become ready within ${READY_TIMEOUT}s (log above)"
  fi
  log "ready on http://127.0.0.1:$port/apis/ccompat/v7 after $((($(date +%s%N) - started) / 1000000)) ms"
}

stop() {
  local port run pid
  port="$(port_arg "${1:-}")"
  run="$ROOT/.run/registry-$port"
  if pid="$(running_pid "$run" "$port")"; then
    log "stopping pid $pid (port $port)"
    stop_pid "$pid" TERM 20
    log "stopped (port $port)"
  else
    log "not running on port $port"
  fi
  rm -rf "$run"
}

status() {
  local port run pid
  port="$(port_arg "${1:-}")"
  run="$ROOT/.run/registry-$port"
  if pid="$(running_pid "$run" "$port")"; then
    echo "registry: running, pid $pid, http://127.0.0.1:$port/apis/ccompat/v7, management port $(cat "$run/management.port")"
    return 0
  fi
  echo "registry: not running on port $port"
  return 3
}

verb="${1:-}"
shift || true
case "$verb" in
  fetch) fetch ;;
  start) start "${1:-}" ;;
  stop) stop "${1:-}" ;;
  status) status "${1:-}" ;;
  logs) tail -n 100 "$ROOT/.run/registry-$(port_arg "${1:-}")/registry.log" ;;
  *) usage ;;
esac
