#!/usr/bin/env bash
# The bridge's main job end to end on this machine: the bundled upstream simulator, a real Kafka and a real
# Redis, the bridge itself, and a consumer printing the events as they arrive. Without a real upstream
# configured (UPSTREAM_BASE_URL), it drives the simulator through status changes, edits and new reviews.
#
# Usage: npm run demo            (DEMO_SECONDS=60 DEMO_REVIEWS=5000 by default)
#        DEMO_REGISTRY=1 npm run demo   also starts a schema registry (scripts/registry.sh, Java 21+) and runs the
#        bridge with SCHEMA_REGISTRY_URL: a subject per topic, every event's dataschema naming its schema
#        DEMO_MONITORING=1 npm run demo also starts Prometheus and Alertmanager (scripts/monitoring.sh) on the shipped
#        alert rules (every `for` capped at 10 s so that alerts fire within the demo), sends a burst of rejections,
#        and ends by printing the alerts Alertmanager delivered and the Prometheus and Alertmanager URLs
set -euo pipefail
LOG_NAME=demo
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
DEMO_SECONDS="${DEMO_SECONDS:-60}"
DEMO_REVIEWS="${DEMO_REVIEWS:-5000}"
RUN="$ROOT/.run/demo"
mkdir -p "$RUN"
say() { printf '\n\033[1mdemo: %s\033[0m\n' "$*"; }

# shellcheck source=scripts/node.sh
source scripts/node.sh
use_node24
say "running on Node $(node --version)"
install_dependencies
bash scripts/kafka.sh fetch
export SERVICES_ENV_FILE="$RUN/services.env"
# The usual ports, or free ones when something else (a developer's own services, another demo) holds them.
export KAFKA_PORT="${KAFKA_PORT:-$(port_or_free 39092)}" REDIS_PORT="${REDIS_PORT:-$(port_or_free 36379)}"
pids=()
cleanup() {
  say "stopping"
  for pid in "${pids[@]+"${pids[@]}"}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]+"${pids[@]}"}"; do wait "$pid" 2>/dev/null || true; done
  bash scripts/services.sh down || true
  if [[ -n "${REGISTRY_PORT:-}" ]]; then bash scripts/registry.sh stop "$REGISTRY_PORT" || true; fi
  if [[ -n "${MONITORING:-}" ]]; then bash scripts/monitoring.sh stop demo || true; fi
}
trap cleanup EXIT
bash scripts/services.sh up
# shellcheck disable=SC1090
source "$SERVICES_ENV_FILE"

if [[ -n "${DEMO_REGISTRY:-}" && "${DEMO_REGISTRY}" != 0 ]]; then
  REGISTRY_PORT="$(free_port)"
  say "starting a schema registry (Apicurio Registry) on port $REGISTRY_PORT"
  bash scripts/registry.sh start "$REGISTRY_PORT"
  export SCHEMA_REGISTRY_URL="http://127.0.0.1:$REGISTRY_PORT/apis/ccompat/v7"
fi

# node --import tsx runs TypeScript in this very process, so a signal to the pid reaches the program itself.
TSX="node --import tsx"
SIM_PORT="${SIM_PORT:-$(port_or_free 18080)}"
if [[ -z "${UPSTREAM_BASE_URL:-}" ]]; then
  say "starting the upstream simulator with $DEMO_REVIEWS reviews (10 requests/s limit, like the real service)"
  $TSX src/cli.ts simulate --port "$SIM_PORT" --reviews "$DEMO_REVIEWS" --malformed-rate 0.001 >"$RUN/simulator.log" 2>&1 &
  pids+=($!)
  export UPSTREAM_BASE_URL="http://127.0.0.1:$SIM_PORT" UPSTREAM_CLIENT_ID=demo-client UPSTREAM_CLIENT_SECRET=demo-secret
  for _ in $(seq 100); do curl -fs -o /dev/null -X POST -u demo-client:demo-secret "$UPSTREAM_BASE_URL/oauth2/token?grant_type=client_credentials" && break; sleep 0.2; done
  SIMULATED=1
fi

# The fingerprint key from a file, as in production (docs/security.md): made once, kept with the demo's state.
if [[ -z "${FINGERPRINT_KEY_FILE:-}${FINGERPRINT_KEK_FILE:-}" && "${FINGERPRINT_KEY_GENERATE:-}" != true ]]; then
  export FINGERPRINT_KEY_FILE="$RUN/fingerprint-key"
  [[ -s "$FINGERPRINT_KEY_FILE" ]] || (umask 077 && head -c 32 /dev/urandom | base64 >"$FINGERPRINT_KEY_FILE")
fi
export BRIDGE_ACCOUNT="${BRIDGE_ACCOUNT:-demo-$(date +%s)}" POLL_INTERVAL_MS="${POLL_INTERVAL_MS:-2000}" POLL_OVERLAP_MS="${POLL_OVERLAP_MS:-60000}" HTTP_PORT="${HTTP_PORT:-$(port_or_free 19464)}" HTTP_HOST=127.0.0.1

say "starting the bridge (account $BRIDGE_ACCOUNT; metrics on http://127.0.0.1:$HTTP_PORT/metrics; log in $RUN/bridge.log)"
$TSX src/cli.ts run >"$RUN/bridge.log" 2>&1 &
pids+=($!)
if [[ -n "${DEMO_MONITORING:-}" && "${DEMO_MONITORING}" != 0 ]]; then
  # Prometheus starts once the bridge serves /metrics: before, it would see no bridge (ReviewsBridgeMetricsAbsent).
  for _ in $(seq 300); do curl -fs -o /dev/null "http://127.0.0.1:$HTTP_PORT/metrics" && break; sleep 0.2; done
  # Alertmanager's webhook: every notification appended to alerts.jsonl as it arrives, and said on the console.
  HOOK_PORT="$(free_port)"
  : >"$RUN/alerts.jsonl"
  node -e '
    const fs = require("fs");
    require("http").createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        fs.appendFileSync(process.argv[1], body.replace(/\n/g, " ") + "\n");
        for (const a of JSON.parse(body).alerts ?? []) console.log(`\x1b[1malert ${a.status}: ${a.labels.alertname} (account ${a.labels.account ?? "-"})\x1b[0m: ${a.annotations.summary ?? ""}`);
        res.end();
      });
    }).listen(Number(process.argv[2]), "127.0.0.1");' "$RUN/alerts.jsonl" "$HOOK_PORT" &
  pids+=($!)
  say "starting Prometheus and Alertmanager on the shipped rules (every 'for' capped at 10 s for the demo)"
  MONITORING=1
  bash scripts/monitoring.sh start demo --targets "127.0.0.1:$HTTP_PORT" --webhook "http://127.0.0.1:$HOOK_PORT/" \
    --interval 2s --for-at-most 10s >"$RUN/monitoring.env"
  # shellcheck disable=SC1091
  source "$RUN/monitoring.env"
  say "Prometheus: $PROMETHEUS_URL   Alertmanager: $ALERTMANAGER_URL"
fi
say "watching the topics with a real consumer"
$TSX scripts/watch-events.ts &
pids+=($!)

for _ in $(seq 300); do
  status="$($TSX src/cli.ts status 2>/dev/null || true)"
  [[ "$status" == *'"initialLoadDone": true'* ]] && break
  sleep 1
done
say "initial load done: $($TSX src/cli.ts status | grep -E 'snapshotReviews|watermark' | tr -d '\n ')"

if [[ -n "${SIMULATED:-}" ]]; then
  ctl() { curl -fs -X "$1" -H 'content-type: application/json' -d "${3:-{\}}" "$UPSTREAM_BASE_URL/_control$2" >/dev/null; }
  say "changing publication statuses (some to REJECTED), creating reviews, editing text"
  for id in 11 12 13; do ctl POST "/reviews/$id/status" '{"client":"REJECTED"}'; done
  ctl POST /reviews/14/status '{"client":"APPROVED","pwr":"APPROVED"}'
  ctl POST /reviews '{"headline":"Brand new review from the demo","rating":5}'
  ctl PATCH /reviews/15 '{"comments":"edited in the demo: invisible to incremental polls","rating":2}'
  if [[ -n "${MONITORING:-}" ]]; then
    say "a burst of rejections (reviews 101-140 to REJECTED): ReviewsBridgeRejectedSpike should fire"
    for id in $(seq 101 140); do ctl POST "/reviews/$id/status" '{"client":"REJECTED"}'; done
  fi
  sleep 6
  say "asking for a reconciliation sweep (catches the edit of review 15)"
  $TSX src/cli.ts sweep
fi

end=$((SECONDS + DEMO_SECONDS))
while ((SECONDS < end)); do
  sleep 5
  if [[ -n "${SIMULATED:-}" ]]; then ctl POST "/reviews/$((RANDOM % DEMO_REVIEWS + 1))/status" '{"pwr":"REJECTED"}'; fi
done
say "status"
$TSX src/cli.ts status
if [[ -n "${SCHEMA_REGISTRY_URL:-}" && -n "${REGISTRY_PORT:-}" ]]; then
  say "subjects in the schema registry ($SCHEMA_REGISTRY_URL/subjects)"
  curl -s "$SCHEMA_REGISTRY_URL/subjects"; echo
fi
say "a few metrics"
curl -s "http://127.0.0.1:$HTTP_PORT/metrics" | grep -E '^reviews_bridge_(events_published_total|reviews_processed_total|dead_letter_records_total|status_transitions_total|passes_total|watermark_lag_seconds)' | grep -v ' 0$' | head -30 || true  # head closes the pipe early: not a failure
if [[ -n "${MONITORING:-}" ]]; then
  if [[ -n "${SIMULATED:-}" ]]; then
    # Evaluation every 2 s, `for` 10 s, Alertmanager's group wait 2 s: the spike arrives well within a minute.
    for _ in $(seq 60); do grep -q ReviewsBridgeRejectedSpike "$RUN/alerts.jsonl" && break; sleep 1; done
  fi
  say "alerts Alertmanager delivered to the webhook ($RUN/alerts.jsonl)"
  node -e '
    const seen = new Map();
    for (const line of require("fs").readFileSync(process.argv[1], "utf8").split("\n").filter(Boolean)) {
      for (const a of JSON.parse(line).alerts ?? []) {
        const labels = Object.entries(a.labels).filter(([k]) => k !== "alertname").map(([k, v]) => `${k}=${v}`).join(" ");
        seen.set(`${a.labels.alertname} ${labels}`, `${a.status}: ${a.annotations.summary ?? ""}`);
      }
    }
    if (seen.size === 0) console.log("(none)");
    for (const [k, v] of seen) console.log(`  ${k}\n    ${v}`);' "$RUN/alerts.jsonl"
  say "Prometheus: $PROMETHEUS_URL (alerts: $PROMETHEUS_URL/api/v1/alerts)   Alertmanager: $ALERTMANAGER_URL (alerts: $ALERTMANAGER_URL/api/v2/alerts); both stop now"
fi
