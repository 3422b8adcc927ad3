#!/usr/bin/env bash
# THE test command (npm test, .ci/run). From a fresh clone it:
#   0. runs everything below on Node 24 LTS (scripts/node.sh: fetched once into .cache/node/ when the machine's
#      node is older) and prints that version,
#   1. installs node_modules (npm ci) when missing, older than package-lock.json or built by another Node,
#   2. fetches the Kafka broker jars and the schema registry (cached in .cache/; the registry tests start the
#      registry themselves, once per run), installs Prometheus and Alertmanager when missing (Debian packages),
#      and starts Kafka + Redis on free ports with scripts/services.sh, unless KAFKA_BROKERS and REDIS_URL are
#      already set (then those are used),
#   3. runs npm run typecheck, npm run lint, and vitest (all projects: unit, integration, e2e),
#   4. always stops what it started, prints a one-line summary and exits non-zero when anything failed
#      (the tests' own exit code when they failed).
# Extra arguments go to vitest:  npm test -- --project unit     bash scripts/test.sh test/integration/kafka.test.ts
# Environment: TEST_TIMEOUT_SECONDS (vitest wall clock limit, default 3000: the suite took 1,760 s on a busy 2-core machine this round); KAFKA_VERSION (the broker of the main run,
# default the pinned 4.x of scripts/kafka/pom.xml; KAFKA_VERSION=3.9.2 runs everything on 3.9); TEST_KAFKA_COMPAT (the
# broker version of the compatibility run that follows a whole run, default 3.9.2; off skips it);
# TEST_KAFKA_COMPAT_TESTS (the test files of that run, space-separated; default the Kafka-facing subset below).
# TEST_TOPOLOGY=kafka3,sentinel|cluster (comma-separated) runs the bridges of the e2e suite against a three-broker
# Kafka (scripts/kafka-cluster.sh) and/or Redis with Sentinel or a Redis Cluster (scripts/redis-topology.sh), each
# started on free ports and stopped afterwards; integration tests keep the plain Redis of REDIS_URL.
set -euo pipefail

LOG_NAME=test.sh
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
# `bash scripts/test.sh -- --project unit` means the same as `npm test -- --project unit` (vitest would ignore
# the options after a `--` and run every project).
if [[ "${1:-}" == -- ]]; then shift; fi
T0=$SECONDS
step() { printf '\n==> %s\n' "$*" >&2; }

# Each run keeps its own record of what it started, so concurrent runs (or a developer's long-lived
# services from `scripts/services.sh up`) never stop each other's services.
export SERVICES_ENV_FILE="$ROOT/.run/test-$$.env"
services_started=no
topology_stops=()
# shellcheck disable=SC2317 # invoked by the EXIT trap
cleanup() {
  local rc=$? stop
  for stop in "${topology_stops[@]+"${topology_stops[@]}"}"; do
    step "stopping: $stop"
    # shellcheck disable=SC2086 # the command and its arguments, split on purpose
    bash $stop || true
  done
  if [[ "$services_started" == yes ]]; then
    step "stopping the services this run started"
    bash scripts/services.sh down || true
  fi
  exit "$rc"
}
trap cleanup EXIT
# A killed run still cleans up (the EXIT trap runs after these handlers exit).
trap 'exit 130' INT
trap 'exit 143' TERM

# shellcheck source=scripts/node.sh
source scripts/node.sh
use_node24
NODE_VERSION="$(node --version)"
step "Node $NODE_VERSION ($(command -v node))"
install_dependencies

TEST_TOPOLOGY="${TEST_TOPOLOGY:-}"
for topology in ${TEST_TOPOLOGY//,/ }; do
  step "topology $topology"
  case "$topology" in
    kafka3)
      base="$(free_base 6)"
      topology_stops+=("scripts/kafka-cluster.sh stop $base --clean")
      bash scripts/kafka-cluster.sh start "$base"
      # shellcheck disable=SC1090
      source ".run/kafka-cluster-$base.env"
      ;;
    sentinel | cluster)
      if [[ "$topology" == cluster ]]; then base="$(free_base 6 1)"; else base="$(free_base 5)"; fi
      topology_stops+=("scripts/redis-topology.sh $topology stop $base")
      bash scripts/redis-topology.sh "$topology" start "$base"
      # shellcheck disable=SC1090
      source ".run/redis-$topology-$base.env"
      ;;
    *)
      echo "TEST_TOPOLOGY: unknown topology '$topology' (kafka3, sentinel, cluster)" >&2
      exit 2
      ;;
  esac
done

# The schema registry the registry tests start (test/helpers/registry.ts): fetched here, like the Kafka jars, so
# that no test spends its time on the download (cached under .cache/ after the first run).
if [[ -z "${TEST_SCHEMA_REGISTRY_URL:-}" ]]; then
  step "schema registry (Apicurio Registry from Maven Central)"
  t=$SECONDS
  bash scripts/registry.sh fetch
  echo "(fetch: $((SECONDS - t)) s)" >&2
fi

# Prometheus and Alertmanager for test/e2e/monitoring.test.ts: installed here when missing (Debian packages), so
# that the test does not spend its time on apt-get.
step "monitoring packages (Debian's prometheus, prometheus-alertmanager)"
bash scripts/monitoring.sh install

if [[ -z "${KAFKA_BROKERS:-}" || -z "${REDIS_URL:-}" ]]; then
  if [[ -z "${KAFKA_BROKERS:-}" ]]; then
    step "Kafka broker jars"
    t=$SECONDS
    bash scripts/kafka.sh fetch
    echo "(fetch: $((SECONDS - t)) s)" >&2
  fi
  step "starting services"
  t=$SECONDS
  services_started=yes
  KAFKA_PORT="$(free_port)" REDIS_PORT="$(free_port)" bash scripts/services.sh up
  # shellcheck disable=SC1090
  source "$SERVICES_ENV_FILE"
  echo "(services: $((SECONDS - t)) s)" >&2
else
  step "using KAFKA_BROKERS=$KAFKA_BROKERS REDIS_URL=$REDIS_URL"
fi

result() { if [[ "$1" == 0 ]]; then echo ok; else echo "FAILED (exit $1)"; fi; }

step "npm run typecheck"
set +e
npm run --silent typecheck
typecheck=$?
set -e

step "npm run lint"
set +e
npm run --silent lint
lint=$?
set -e

step "vitest run $*"
t=$SECONDS
set +e
# A JSON report beside the usual output: the summary at the end names the failed tests (CI shows a log's tail).
report="$ROOT/.run/vitest-$$.json"
timeout -k 30 "${TEST_TIMEOUT_SECONDS:-3000}" npx vitest run --reporter=default --reporter=json --outputFile.json="$report" "$@"
tests=$?
set -e
[[ "$tests" == 124 ]] && echo "vitest did not finish within ${TEST_TIMEOUT_SECONDS:-3000} s" >&2

# Compatibility run (a whole run only): the Kafka-facing subset against the previous broker line, on a broker of
# its own. TEST_KAFKA_COMPAT=<version> picks it (default 3.9.2), TEST_KAFKA_COMPAT=off skips it.
compat_version="${TEST_KAFKA_COMPAT:-3.9.2}"
compat=skipped
if [[ $# -eq 0 && "$compat_version" != off && -z "$TEST_TOPOLOGY" ]]; then
  step "compatibility: Kafka $compat_version (the Kafka-facing subset)"
  t=$SECONDS
  compat_port="$(free_port)"
  topology_stops+=("scripts/kafka.sh stop $compat_port --clean")
  set +e
  KAFKA_VERSION="$compat_version" bash scripts/kafka.sh start "$compat_port" &&
    # shellcheck disable=SC2086 # a list of paths, split on purpose
    KAFKA_VERSION="$compat_version" KAFKA_BROKERS="127.0.0.1:$compat_port" timeout -k 30 600 npx vitest run \
      --reporter=default --reporter=json --outputFile.json="$ROOT/.run/vitest-compat-$$.json" \
      ${TEST_KAFKA_COMPAT_TESTS:-test/integration/kafka test/e2e/bridge.test.ts test/e2e/faults/redis-loss.test.ts test/e2e/security.test.ts test/e2e/deployments.test.ts test/e2e/faults/redis-partial-loss.test.ts test/e2e/faults/redis-refuses-writes.test.ts test/e2e/faults/commit-unknown.test.ts}
  compat=$?
  set -e
  echo "(compatibility run: $((SECONDS - t)) s)" >&2
fi

echo >&2
compat_result() { if [[ "$compat" == skipped ]]; then echo skipped; else result "$compat"; fi; }
if [[ "$tests" != 0 ]]; then node scripts/test-failures.mjs "$report" "vitest (Kafka ${KAFKA_VERSION:-default})" || true; fi
if [[ "$compat" != skipped && "$compat" != 0 ]]; then
  node scripts/test-failures.mjs "$ROOT/.run/vitest-compat-$$.json" "compatibility (Kafka $compat_version)" || true
fi
echo "test.sh (Node $NODE_VERSION): typecheck $(result $typecheck), lint $(result $lint), tests $(result $tests), Kafka $compat_version compatibility $(compat_result); total $((SECONDS - T0)) s"
if [[ "$tests" != 0 ]]; then exit "$tests"; fi
if [[ "$compat" != skipped && "$compat" != 0 ]]; then exit "$compat"; fi
if [[ "$typecheck" != 0 || "$lint" != 0 ]]; then exit 1; fi
exit 0
