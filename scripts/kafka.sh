#!/usr/bin/env bash
# A real single-node Kafka broker (KRaft, combined broker+controller) without Docker, for tests and the demo.
# The broker's jars come from Maven Central (scripts/kafka/pom.xml), cached under .cache/ (git-ignored).
#
# Usage: scripts/kafka.sh VERB [PORT] [--clean]        PORT defaults to 39092 (PLAINTEXT on 127.0.0.1)
#   fetch              copy the broker classpath to .cache/kafka/<version>/libs (no-op when already complete)
#   start   [PORT]     start a broker (formats storage on first start, reuses data on later starts) and wait
#                      until it serves requests; no-op when this broker is already running
#   stop    [PORT] [--clean]
#                      graceful stop (SIGTERM, SIGKILL after 60 s); keeps the data unless --clean
#   kill    [PORT]     SIGKILL, no graceful shutdown (crash simulation); keeps the data
#   restart [PORT]     stop (keeping data) and start again
#   clean   [PORT]     stop and delete the broker's data and run directory
#   status  [PORT]     exit 0 when running (prints pid and address), 3 when not
#   logs    [PORT]     print the tail of the broker log
# Everything of one broker lives in .run/kafka-<PORT>/ (server.properties, data/, logs/, kafka.pid).
# Environment: KAFKA_READY_TIMEOUT (seconds, default 90); KAFKA_HEAP_OPTS, KAFKA_JVM_OPTS override JVM flags;
# KAFKA_VERSION picks the broker (default: the pinned 4.x of scripts/kafka/pom.xml; a 3.x version uses
# scripts/kafka/pom-3.x.xml, e.g. KAFKA_VERSION=3.9.2 for the compatibility run); KAFKA_POM names another manifest.
# Members of a multi-broker cluster (scripts/kafka-cluster.sh sets these): KAFKA_NODE_ID (default 1),
# KAFKA_CONTROLLER_PORT, KAFKA_QUORUM_VOTERS (id@host:port,...), KAFKA_CLUSTER_ID (shared by all members),
# KAFKA_CLUSTER_SIZE (replication defaults: internal topics min(3, size), min.insync.replicas 2 from 3 brokers),
# KAFKA_READY=no (start without waiting: one member of a quorum cannot serve alone).
set -euo pipefail

LOG_NAME=kafka DEFAULT_PORT=39092
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# KAFKA_VERSION selects the broker: 3.x brokers log through log4j 1 and have their own manifest.
if [[ -z "${KAFKA_POM:-}" && "${KAFKA_VERSION:-}" == 3.* ]]; then POM="$ROOT/scripts/kafka/pom-3.x.xml"; else POM="${KAFKA_POM:-$ROOT/scripts/kafka/pom.xml}"; fi
KAFKA_VERSION="${KAFKA_VERSION:-$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$POM")}"
CACHE_DIR="$ROOT/.cache/kafka/$KAFKA_VERSION"
LIBS="$CACHE_DIR/libs"
M2_REPO="$ROOT/.cache/m2"
READY_TIMEOUT="${KAFKA_READY_TIMEOUT:-90}"

# The pom's checksum marks a complete fetch, so an interrupted copy or a changed pom fetches again.
pom_stamp() { { cat "$POM"; echo "$KAFKA_VERSION"; } | sha256sum | cut -d' ' -f1; }

fetch() {
  local stamp
  stamp="$(pom_stamp)"
  if [[ -f "$CACHE_DIR/.complete" && "$(cat "$CACHE_DIR/.complete")" == "$stamp" ]]; then
    log "using cached Kafka $KAFKA_VERSION jars ($LIBS)"
    return 0
  fi
  ensure_tool java openjdk-17-jre-headless
  ensure_tool mvn maven
  log "fetching Kafka $KAFKA_VERSION jars from Maven Central into $LIBS"
  rm -rf "$LIBS" "$CACHE_DIR/.complete"
  mkdir -p "$LIBS" "$M2_REPO"
  if ! mvn -q -B -Dstyle.color=never -f "$POM" -Dmaven.repo.local="$M2_REPO" -Dkafka.version="$KAFKA_VERSION" \
    dependency:copy-dependencies -DoutputDirectory="$LIBS" >"$CACHE_DIR/fetch.log" 2>&1; then
    cat "$CACHE_DIR/fetch.log" >&2
    die "maven could not fetch the Kafka jars (output above)"
  fi
  compgen -G "$LIBS/kafka_2.13-$KAFKA_VERSION.jar" >/dev/null || die "fetch finished but kafka_2.13-$KAFKA_VERSION.jar is missing"
  echo "$stamp" >"$CACHE_DIR/.complete"
  log "fetched $(find "$LIBS" -name '*.jar' | wc -l) jars"
}

# Prints the pid when the pid file names a live broker of this run dir (guards against a recycled pid).
running_pid() { pid_of "$1/kafka.pid" "$1/server.properties"; }

write_config() {
  local run="$1" port="$2" cport="$3"
  local node="${KAFKA_NODE_ID:-1}" size="${KAFKA_CLUSTER_SIZE:-1}" rf isr
  rf=$((size < 3 ? size : 3))
  isr=$((rf >= 3 ? 2 : 1))
  cat >"$run/server.properties" <<EOF
# Written by scripts/kafka.sh: one combined broker+controller for tests. Regenerated at every start.
process.roles=broker,controller
node.id=$node
controller.quorum.voters=${KAFKA_QUORUM_VOTERS:-$node@127.0.0.1:$cport}
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$run/data
# Single node: every replication factor and ISR minimum is 1; a cluster of 3 or more: 3 and 2.
num.partitions=1
default.replication.factor=$rf
min.insync.replicas=$isr
offsets.topic.replication.factor=$rf
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$isr
transaction.state.log.num.partitions=4
# Tests start many short-lived consumer groups: no join delay, and allow short session timeouts.
group.initial.rebalance.delay.ms=0
group.min.session.timeout.ms=1000
# After a crash (kill -9) the restarted broker must wait for its old registration to expire: keep that short.
broker.heartbeat.interval.ms=500
broker.session.timeout.ms=3000
# Topics must be created explicitly (the bridge creates its own); auto-creation would hide a wrong topic name.
auto.create.topics.enable=false
delete.topic.enable=true
# Small thread pools: CI has 2 cores.
num.network.threads=2
num.io.threads=4
background.threads=4
num.recovery.threads.per.data.dir=1
log.segment.bytes=104857600
log.retention.hours=24
EOF
  cat >"$run/log4j.properties" <<EOF
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.RollingFileAppender
log4j.appender.file.File=$run/logs/server.log
log4j.appender.file.MaxFileSize=20MB
log4j.appender.file.MaxBackupIndex=2
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.org.apache.kafka.clients=WARN
log4j.logger.state.change.logger=WARN
EOF
  # Kafka 4.x logs through log4j 2 (the JVM is given both files; each log4j reads its own).
  cat >"$run/log4j2.properties" <<EOF
status = warn
appender.file.type = RollingFile
appender.file.name = file
appender.file.fileName = $run/logs/server.log
appender.file.filePattern = $run/logs/server.log.%i
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
appender.file.policies.type = Policies
appender.file.policies.size.type = SizeBasedTriggeringPolicy
appender.file.policies.size.size = 20MB
appender.file.strategy.type = DefaultRolloverStrategy
appender.file.strategy.max = 2
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
logger.request.name = kafka.request.logger
logger.request.level = warn
logger.clients.name = org.apache.kafka.clients
logger.clients.level = warn
logger.state.name = state.change.logger
logger.state.level = warn
EOF
}

show_log_tail() {
  local run="$1"
  log "---- last lines of $run/logs/server.log ----"
  tail -n 40 "$run/logs/server.log" >&2 2>/dev/null || true
  if [[ -s "$run/kafka.out" ]]; then
    log "---- last lines of $run/kafka.out ----"
    tail -n 20 "$run/kafka.out" >&2 || true
  fi
}

wait_ready() {
  local run="$1" port="$2" pid="$3"
  local tsx="$ROOT/node_modules/.bin/tsx"
  [[ -x "$tsx" ]] || die "node_modules missing: run 'npm ci' first (the readiness check uses kafkajs)"
  (cd "$ROOT" && "$tsx" scripts/kafka/ready.ts "127.0.0.1:$port" "$READY_TIMEOUT" "$pid")
}

start() {
  local port run pid cport started
  port="$(port_arg "${1:-}")"
  run="$ROOT/.run/kafka-$port"
  if pid="$(running_pid "$run")"; then
    log "already running on 127.0.0.1:$port (pid $pid)"
    [[ "${KAFKA_READY:-yes}" == no ]] && return 0
    wait_ready "$run" "$port" "$pid" || die "broker pid $pid runs but does not serve requests"
    return 0
  fi
  if port_listening "$port"; then
    local owner
    owner="$(who_listens "$port")"
    die "port $port is already in use${owner:+ by $owner} and not by a broker of this project; choose another port (scripts/kafka.sh start PORT)"
  fi
  fetch
  ensure_tool java openjdk-17-jre-headless
  mkdir -p "$run/logs" "$run/data"
  # Keep the controller port across restarts; pick a new one only if it has been taken meanwhile.
  cport="${KAFKA_CONTROLLER_PORT:-$(cat "$run/controller.port" 2>/dev/null || true)}"
  if [[ -z "${KAFKA_CONTROLLER_PORT:-}" ]] && { [[ -z "$cport" ]] || port_listening "$cport"; }; then cport="$(free_port)"; fi
  echo "$cport" >"$run/controller.port"
  write_config "$run" "$port" "$cport"

  if [[ ! -f "$run/data/meta.properties" ]]; then
    local cluster_id
    # Short-lived tool JVMs: C1 only and SerialGC start fastest.
    local tool=(java -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Dlog4j.configuration="file:$run/log4j.properties"
      -Dlog4j2.configurationFile="$run/log4j2.properties"
      -Dkafka.logs.dir="$run/logs" -cp "$LIBS/*" kafka.tools.StorageTool)
    cluster_id="${KAFKA_CLUSTER_ID:-$("${tool[@]}" random-uuid 2>/dev/null | tail -1)}"
    [[ -n "$cluster_id" ]] || die "StorageTool random-uuid printed nothing"
    "${tool[@]}" format \
      --cluster-id="$cluster_id" -c "$run/server.properties" >"$run/format.out" 2>&1 ||
      { cat "$run/format.out" >&2; die "formatting the storage in $run/data failed"; }
    log "formatted storage (cluster id $cluster_id)"
  else
    log "reusing existing data in $run/data"
  fi

  local heap="${KAFKA_HEAP_OPTS:--Xms256m -Xmx512m}"
  # SerialGC and C1-only compilation: fastest start-up and smallest footprint for a test broker on 2 cores.
  local jvm="${KAFKA_JVM_OPTS:--XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true}"
  started=$(date +%s%N)
  rm -f "$run/kafka.pid"
  # setsid: the broker must outlive the caller's process group (a test runner's Ctrl-C must not kill it
  # half-way); the inner bash records its own pid and then becomes java, so the pid file names the JVM.
  # shellcheck disable=SC2086,SC2016
  setsid bash -c 'echo $$ >"$1/kafka.pid"; shift; exec "$@"' _ "$run" \
    java $heap $jvm -Dkafka.logs.dir="$run/logs" -Dlog4j.configuration="file:$run/log4j.properties" \
    -Dlog4j2.configurationFile="$run/log4j2.properties" \
    -cp "$LIBS/*" kafka.Kafka "$run/server.properties" </dev/null >"$run/kafka.out" 2>&1 &
  for _ in $(seq 50); do [[ -s "$run/kafka.pid" ]] && break; sleep 0.1; done
  pid="$(cat "$run/kafka.pid" 2>/dev/null || true)"
  [[ -n "$pid" ]] || die "broker did not start (no pid file)"
  if [[ "${KAFKA_READY:-yes}" == no ]]; then
    log "started Kafka $KAFKA_VERSION node ${KAFKA_NODE_ID:-1} pid $pid on 127.0.0.1:$port (controller $cport)"
    return 0
  fi
  log "started Kafka $KAFKA_VERSION pid $pid on 127.0.0.1:$port (controller $cport); waiting until it serves requests"
  if ! wait_ready "$run" "$port" "$pid"; then
    show_log_tail "$run"
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$run/kafka.pid"
    die "broker on port $port did not become ready within ${READY_TIMEOUT}s"
  fi
  log "ready on 127.0.0.1:$port after $((($(date +%s%N) - started) / 1000000)) ms"
}

stop() {
  local port run pid clean="$2" signal="${3:-TERM}"
  port="$(port_arg "${1:-}")"
  run="$ROOT/.run/kafka-$port"
  if pid="$(running_pid "$run")"; then
    log "stopping pid $pid (port $port, SIG$signal)"
    stop_pid "$pid" "$signal" 60
    log "stopped (port $port)"
  else
    log "not running on port $port"
  fi
  rm -f "$run/kafka.pid"
  if [[ "$clean" == yes && -d "$run" ]]; then
    rm -rf "$run"
    log "removed $run"
  fi
}

status() {
  local port run pid
  port="$(port_arg "${1:-}")"
  run="$ROOT/.run/kafka-$port"
  if pid="$(running_pid "$run")"; then
    echo "kafka: running, pid $pid, 127.0.0.1:$port, run dir $run"
    return 0
  fi
  echo "kafka: not running on port $port"
  return 3
}

verb="${1:-}"
shift || true
parse_clean "$@"
set -- "${ARGS[@]+"${ARGS[@]}"}"

case "$verb" in
  fetch) fetch ;;
  start) start "${1:-}" ;;
  stop) stop "${1:-}" "$CLEAN" ;;
  kill) stop "${1:-}" "$CLEAN" KILL ;;
  restart)
    stop "${1:-}" no
    start "${1:-}"
    ;;
  clean) stop "${1:-}" yes ;;
  status) status "${1:-}" ;;
  logs) tail -n 100 "$ROOT/.run/kafka-$(port_arg "${1:-}")/logs/server.log" ;;
  *) usage ;;
esac
