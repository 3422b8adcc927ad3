#!/usr/bin/env bash
# THE test command (npm test, .ci/run). From a fresh clone it:
#   1. installs node_modules (npm ci) when missing or older than package-lock.json,
#   2. fetches the Kafka broker jars (cached in .cache/) and starts Kafka + Redis on free ports with
#      scripts/services.sh, unless KAFKA_BROKERS and REDIS_URL are already set (then those are used),
#   3. runs npm run typecheck, npm run lint, and vitest (all projects: unit, integration, e2e),
#   4. always stops what it started, prints a one-line summary and exits non-zero when anything failed
#      (the tests' own exit code when they failed).
# Extra arguments go to vitest:  npm test -- --project unit     bash scripts/test.sh test/integration/kafka.test.ts
# Environment: TEST_TIMEOUT_SECONDS (vitest wall clock limit, default 1200).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
T0=$SECONDS
step() { printf '\n==> %s\n' "$*" >&2; }

# Each run keeps its own record of what it started, so concurrent runs (or a developer's long-lived
# services from `scripts/services.sh up`) never stop each other's services.
export SERVICES_ENV_FILE="$ROOT/.run/test-$$.env"
services_started=no
# shellcheck disable=SC2317 # invoked by the EXIT trap
cleanup() {
  local rc=$?
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

if [[ ! -d node_modules || ! -f node_modules/.package-lock.json || package-lock.json -nt node_modules/.package-lock.json ]]; then
  step "npm ci"
  npm ci --no-audit --no-fund
fi

free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }

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
timeout -k 30 "${TEST_TIMEOUT_SECONDS:-1200}" npx vitest run "$@"
tests=$?
set -e
[[ "$tests" == 124 ]] && echo "vitest did not finish within ${TEST_TIMEOUT_SECONDS:-1200} s" >&2

echo >&2
echo "test.sh: typecheck $(result $typecheck), lint $(result $lint), tests $(result $tests) in $((SECONDS - t)) s; total $((SECONDS - T0)) s"
if [[ "$tests" != 0 ]]; then exit "$tests"; fi
if [[ "$typecheck" != 0 || "$lint" != 0 ]]; then exit 1; fi
exit 0
