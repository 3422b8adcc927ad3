#!/usr/bin/env bash
# Production-shaped Redis topologies on loopback without Docker, from Debian's redis-server, redis-sentinel and
# redis-cli (installed with apt-get when missing), for the failover tests.
#
# Usage: scripts/redis-topology.sh KIND VERB [ARGS]
#   KIND sentinel (BASE defaults to 36500): a primary on BASE, its replica on BASE+1, and three Sentinels on
#        BASE+2..BASE+4 watching it under the name "bridge" (quorum 2, down after 1 s)
#   KIND cluster  (BASE defaults to 36600): a Redis Cluster of three primaries with one replica each on
#        BASE..BASE+5 (redis-cli --cluster create ... --cluster-replicas 1), node timeout 2 s;
#        REDIS_CLUSTER_REPLICAS=0 makes it three primaries without replicas on BASE..BASE+2 (the quick way)
#   start  [BASE]        start every member, wait until the topology serves, write the env file
#   stop   [BASE]        stop every member by pid (SIGTERM, SIGKILL after 20 s) and delete the run directory
#   kill   PORT [BASE]   SIGKILL one member (crash); its data (append-only file) is kept
#   start-member PORT [BASE]
#                        start that member again on its data (a sentinel-managed node rejoins as a replica)
#   status [BASE]        exit 0 when every member runs
# Everything lives in .run/redis-KIND-BASE/ (one directory per port: redis.conf, data, pid, log); the env file
# .run/redis-KIND-BASE.env exports REDIS_SENTINELS + REDIS_SENTINEL_NAME, or REDIS_CLUSTER_NODES.
# Data nodes keep an append-only file (fsync every second), as production would.
# REDIS_TOPOLOGY_TLS=yes at start makes a secured topology (later verbs find it in the run directory): every member
# serves TLS only on its port (port 0: no plain-text listener) and requires a client certificate; replication, the
# Cluster bus and Sentinel's own connections use TLS too; the default user is off, the ACL user "bridge" is what
# the bridge uses, "admin" what the members and this script use. A throw-away CA, a server certificate (localhost,
# 127.0.0.1), a client certificate and the passwords are written to .run/redis-KIND-BASE/tls/ (ca.pem, server.pem,
# server.key, client.pem, client.key, bridge.password, admin.password); the env file then also exports REDIS_TLS,
# REDIS_TLS_CA_FILE, REDIS_TLS_CERT_FILE, REDIS_TLS_KEY_FILE, REDIS_USERNAME, REDIS_PASSWORD_FILE (and for Sentinel
# REDIS_SENTINEL_USERNAME, REDIS_SENTINEL_PASSWORD_FILE), with addresses by the name localhost.
set -euo pipefail

LOG_NAME=redis-topology
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
MASTER_NAME=bridge

# The redis-sentinel and redis-tools packages come with redis-server on Debian but are separate packages.
ensure_installed() {
  local tool package
  for tool in redis-server:redis-server redis-cli:redis-tools redis-sentinel:redis-sentinel; do
    package="${tool#*:}"
    tool="${tool%%:*}"
    ensure_tool "$tool" "$package"
  done
}

# A secured topology is recognised by its tls/ directory, so that kill, start-member and stop need no setting.
tls_dir() { echo "$(run_dir)/tls"; }
secured() { [[ -f "$(tls_dir)/ca.pem" ]]; }
CLI_SECURE=()
cli() { redis-cli -h 127.0.0.1 -p "$1" "${CLI_SECURE[@]}" "${@:2}"; }

# The CA, server and client certificates (EC P-256: quick to make) and the ACL passwords of a secured topology.
make_secrets() {
  local dir name cn san
  dir="$(tls_dir)"
  mkdir -p "$dir"
  ssl() { openssl "$@" >/dev/null 2>&1 || die "openssl $1 failed"; }
  ssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$dir/ca.key" -out "$dir/ca.pem" \
    -days 2 -subj /CN=redis-topology-ca
  for name in server client; do
    if [[ $name == server ]]; then cn=localhost san='DNS:localhost,IP:127.0.0.1'
    else cn=bridge-client san=DNS:bridge-client; fi
    echo "subjectAltName=$san" >"$dir/$name.ext"
    ssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$dir/$name.key" -out "$dir/$name.csr" \
      -subj "/CN=$cn"
    ssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial -days 2 \
      -extfile "$dir/$name.ext" -out "$dir/$name.pem"
  done
  openssl rand -hex 16 >"$dir/bridge.password"
  openssl rand -hex 16 >"$dir/admin.password"
  chmod 600 "$dir"/*.key "$dir"/*.password
}

# redis-cli's arguments for a secured topology (the admin user, with the client certificate).
secure_cli() {
  local dir
  dir="$(tls_dir)"
  CLI_SECURE=(--tls --cacert "$dir/ca.pem" --cert "$dir/client.pem" --key "$dir/client.key"
    --user admin --pass "$(cat "$dir/admin.password")" --no-auth-warning)
  HOST=localhost
}

# TLS and ACL lines of a member's config: the same certificate serves and (to other members) identifies it.
secure_config() {
  local port="$1" dir admin
  dir="$(tls_dir)"
  admin="$(cat "$dir/admin.password")"
  printf 'port 0\ntls-port %s\ntls-cert-file %s\ntls-key-file %s\ntls-ca-cert-file %s\n' \
    "$port" "$dir/server.pem" "$dir/server.key" "$dir/ca.pem"
  printf 'tls-auth-clients yes\ntls-replication yes\nuser default off\n'
  printf 'user admin on >%s ~* &* +@all\nuser bridge on >%s ~* &* +@all\n' "$admin" "$(cat "$dir/bridge.password")"
  if is_sentinel "$port"; then
    printf 'sentinel sentinel-user admin\nsentinel sentinel-pass %s\n' "$admin"
  else
    printf 'masteruser admin\nmasterauth %s\n' "$admin"
    if [[ "$KIND" == cluster ]]; then echo 'tls-cluster yes'; fi
  fi
}
pong() { [[ "$(cli "$1" PING 2>/dev/null)" == PONG ]]; }

# Prints the pid when the member's pid file names a live redis process (guards against a recycled pid).
running_pid() { pid_of "$1/redis.pid" "redis-.*:$2"; }

run_dir() { echo "$ROOT/.run/redis-$KIND-$BASE"; }
env_file() { echo "$ROOT/.run/redis-$KIND-$BASE.env"; }
members() {
  if [[ "$KIND" == sentinel ]]; then seq "$BASE" $((BASE + 4))
  else seq "$BASE" $((BASE + 3 * (1 + CLUSTER_REPLICAS) - 1)); fi
}
is_sentinel() { [[ "$KIND" == sentinel && "$1" -ge $((BASE + 2)) ]]; }

write_config() {
  local port="$1" dir="$2"
  printf 'bind 127.0.0.1\ndaemonize yes\npidfile %s/redis.pid\nlogfile %s/redis.log\ndir %s\n' \
    "$dir" "$dir" "$dir" >"$dir/redis.conf"
  if secured; then secure_config "$port" >>"$dir/redis.conf"; else echo "port $port" >>"$dir/redis.conf"; fi
  if is_sentinel "$port"; then
    # Sentinel rewrites this file with what it learns (replicas, other sentinels, the current primary).
    cat >>"$dir/redis.conf" <<EOF
sentinel resolve-hostnames no
sentinel monitor $MASTER_NAME 127.0.0.1 $BASE 2
sentinel down-after-milliseconds $MASTER_NAME 1000
sentinel failover-timeout $MASTER_NAME 5000
sentinel parallel-syncs $MASTER_NAME 1
EOF
    if secured; then
      printf 'sentinel auth-user %s admin\nsentinel auth-pass %s %s\n' "$MASTER_NAME" "$MASTER_NAME" \
        "$(cat "$(tls_dir)/admin.password")" >>"$dir/redis.conf"
    fi
    return
  fi
  printf 'save ""\nappendonly yes\nappendfsync everysec\n' >>"$dir/redis.conf"
  # A replica that must resync in full (a demoted primary that took writes after the promotion) starts at once
  # instead of after Redis's default 5 s wait for more replicas: writes need its acknowledgement (WAIT).
  printf 'repl-diskless-sync-delay 0\n' >>"$dir/redis.conf"
  if [[ "$KIND" == cluster ]]; then
    printf 'cluster-enabled yes\ncluster-config-file nodes.conf\ncluster-node-timeout 2000\n' >>"$dir/redis.conf"
  elif [[ "$port" != "$BASE" ]]; then
    echo "replicaof 127.0.0.1 $BASE" >>"$dir/redis.conf"
  fi
}

# Starts one member on its existing config (written on the topology's first start, then kept: Sentinel and
# Redis Cluster record their view of the topology in it).
start_member() {
  local port="$1" dir pid
  dir="$(run_dir)/$port"
  if pid="$(running_pid "$dir" "$port")"; then
    log "member $port already running (pid $pid)"
    return 0
  fi
  port_listening "$port" && die "port $port is already in use by something else"
  [[ -f "$dir/redis.conf" ]] || die "no member on port $port in $(run_dir) (start the topology first)"
  if is_sentinel "$port"; then redis-sentinel "$dir/redis.conf"; else redis-server "$dir/redis.conf"; fi
  wait_until 100 pong "$port" && return 0
  tail -n 20 "$dir/redis.log" >&2 || true
  die "member $port did not answer PING within 10 s"
}

stop_member() {
  local port="$1" signal="${2:-TERM}" dir pid
  dir="$(run_dir)/$port"
  pid="$(running_pid "$dir" "$port")" || return 0
  stop_pid "$pid" "$signal" 20
}

sentinel_ready() {
  local s
  for s in $((BASE + 2)) $((BASE + 3)) $((BASE + 4)); do
    cli "$s" SENTINEL CKQUORUM "$MASTER_NAME" 2>/dev/null | grep -q '^OK' || return 1
  done
  cli "$BASE" INFO replication 2>/dev/null | grep -q '^connected_slaves:1'
}

# Every node sees the whole cluster, and every replica is in sync with its primary (writes can be acknowledged).
cluster_ready() {
  local port info
  for port in $(members); do
    cli "$port" CLUSTER INFO 2>/dev/null | grep -q '^cluster_state:ok' || return 1
    info="$(cli "$port" INFO replication 2>/dev/null)"
    if grep -q '^role:master' <<<"$info"; then grep -q "^connected_slaves:$CLUSTER_REPLICAS" <<<"$info" || return 1
    else grep -q '^master_link_status:up' <<<"$info" || return 1; fi
  done
}

start() {
  local port dir started addresses=()
  ensure_installed
  started=$(date +%s%N)
  for port in $(members); do
    if port_listening "$port" && ! running_pid "$(run_dir)/$port" "$port" >/dev/null; then
      die "port $port is already in use; choose another base port"
    fi
  done
  if ! status >/dev/null 2>&1; then
    stop
    if [[ "${REDIS_TOPOLOGY_TLS:-no}" =~ ^(yes|true|1)$ ]]; then
      make_secrets
      secure_cli
    fi
    for port in $(members); do
      dir="$(run_dir)/$port"
      mkdir -p "$dir"
      write_config "$port" "$dir"
    done
  fi
  # A start that fails half-way leaves nothing running.
  trap '[[ -f "$(env_file)" ]] || stop' EXIT
  for port in $(members); do start_member "$port"; done
  if [[ "$KIND" == sentinel ]]; then
    wait_until 300 sentinel_ready || die "timed out waiting for the replica and a sentinel quorum"
    addresses=("$HOST:$((BASE + 2))" "$HOST:$((BASE + 3))" "$HOST:$((BASE + 4))")
    printf 'export REDIS_SENTINELS=%s\nexport REDIS_SENTINEL_NAME=%s\n' \
      "$(IFS=,; echo "${addresses[*]}")" "$MASTER_NAME" >"$(env_file).tmp"
  else
    if ! cluster_ready; then
      for port in $(members); do addresses+=("127.0.0.1:$port"); done
      redis-cli "${CLI_SECURE[@]}" --cluster create "${addresses[@]}" --cluster-replicas "$CLUSTER_REPLICAS" --cluster-yes >"$(run_dir)/create.out" 2>&1 ||
        { cat "$(run_dir)/create.out" >&2; die "redis-cli --cluster create failed"; }
    fi
    wait_until 300 cluster_ready || die "timed out waiting for cluster_state:ok on every node"
    addresses=()
    for port in $(members); do addresses+=("$HOST:$port"); done
    printf 'export REDIS_CLUSTER_NODES=%s\n' "$(IFS=,; echo "${addresses[*]}")" >"$(env_file).tmp"
  fi
  if secured; then secure_env >>"$(env_file).tmp"; fi
  # The env file appears whole: the failure trap above and the callers take its existence for success.
  mv "$(env_file).tmp" "$(env_file)"
  log "ready after $((($(date +%s%N) - started) / 1000000)) ms; env: $(env_file)"
  cat "$(env_file)" >&2
}

stop() {
  local port
  for port in $(members); do stop_member "$port" & done
  wait
  # REDIS_TOPOLOGY_KEEP_LOGS=DIR keeps the members' logs (to read a failed test's failover afterwards).
  if [[ -n "${REDIS_TOPOLOGY_KEEP_LOGS:-}" ]]; then
    mkdir -p "$REDIS_TOPOLOGY_KEEP_LOGS"
    for port in $(members); do cp "$(run_dir)/$port/redis.log" "$REDIS_TOPOLOGY_KEEP_LOGS/$KIND-$port.log" 2>/dev/null || true; done
  fi
  rm -rf "$(run_dir)" "$(env_file)"
}

status() {
  local port rc=0 pid
  for port in $(members); do
    if pid="$(running_pid "$(run_dir)/$port" "$port")"; then echo "redis-$KIND: $port running (pid $pid)"
    else
      echo "redis-$KIND: $port not running"
      rc=3
    fi
  done
  return "$rc"
}

# The bridge's settings for a secured topology (certificate and password files, never a password itself).
secure_env() {
  local dir
  dir="$(tls_dir)"
  printf 'export REDIS_TLS=true\nexport REDIS_TLS_CA_FILE=%s\nexport REDIS_TLS_CERT_FILE=%s\n' \
    "$dir/ca.pem" "$dir/client.pem"
  printf 'export REDIS_TLS_KEY_FILE=%s\nexport REDIS_USERNAME=bridge\nexport REDIS_PASSWORD_FILE=%s\n' \
    "$dir/client.key" "$dir/bridge.password"
  if [[ "$KIND" == sentinel ]]; then
    printf 'export REDIS_SENTINEL_USERNAME=bridge\nexport REDIS_SENTINEL_PASSWORD_FILE=%s\n' "$dir/bridge.password"
  fi
}

member_port() {
  [[ "${1:-}" =~ ^[0-9]+$ ]] && members | grep -qx "$1" || die "'${1:-}' is not a member port of this topology"
  echo "$1"
}

KIND="${1:-}"
LOG_NAME="redis-${KIND:-topology}"
VERB="${2:-}"
CLUSTER_REPLICAS="${REDIS_CLUSTER_REPLICAS:-1}"
[[ "$CLUSTER_REPLICAS" =~ ^[01]$ ]] || die "REDIS_CLUSTER_REPLICAS must be 0 or 1"
case "$KIND" in
  sentinel) DEFAULT_BASE=36500 ;;
  cluster) DEFAULT_BASE=36600 ;;
  *) usage ;;
esac
case "$VERB" in
  start | stop | status) BASE="$(base_arg "${3:-}")" ;;
  kill | start-member) BASE="$(base_arg "${4:-}")" ;;
  *) usage ;;
esac
# Later verbs of a secured topology talk to it as its admin user, over TLS, and name it by its certificate's name.
HOST=127.0.0.1
if secured; then secure_cli; fi
case "$VERB" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  kill) stop_member "$(member_port "${3:-}")" KILL ;;
  start-member) start_member "$(member_port "${3:-}")" ;;
esac
