#!/usr/bin/env bash
# Runs Prometheus' promtool, fetching it on first use from Debian's `prometheus` package.
#
# Usage: scripts/promtool.sh ARGS...          e.g. scripts/promtool.sh test rules deploy/prometheus/alerts.test.yml
#        scripts/promtool.sh --path           print the promtool it would use (installing it when missing)
#
# Lookup order: $PROMTOOL, promtool on PATH, .cache/promtool/usr/bin/promtool. When none is there the .deb is
# downloaded with `apt-get download` and only unpacked into .cache/promtool (dpkg-deb -x): installing the
# package would also register and try to start a prometheus server, which tests do not need. If that fails
# (no apt lists, not root) it falls back to `apt-get install -y prometheus`.
set -euo pipefail

LOG_NAME=promtool.sh
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
CACHE="$ROOT/.cache/promtool"

find_promtool() {
  if [[ -n "${PROMTOOL:-}" ]]; then
    [[ -x "$PROMTOOL" ]] || die "PROMTOOL=$PROMTOOL is not executable"
    echo "$PROMTOOL"
    return 0
  fi
  if command -v promtool >/dev/null 2>&1; then
    command -v promtool
    return 0
  fi
  if [[ -x "$CACHE/usr/bin/promtool" ]]; then
    echo "$CACHE/usr/bin/promtool"
    return 0
  fi
  return 1
}

as_root() {
  if [[ "$(id -u)" -eq 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo -n "$@"
  else
    return 1
  fi
}

# apt-cache knows the package only after `apt-get update`; run it once when the candidate is missing.
ensure_apt_lists() {
  local policy
  policy="$(apt-cache policy prometheus 2>/dev/null || true)"
  if ! grep -Eq 'Candidate: [0-9]' <<<"$policy"; then
    log "apt lists do not know 'prometheus' yet: apt-get update"
    as_root flock -w 300 /tmp/reviews-bridge-apt.lock apt-get -o DPkg::Lock::Timeout=60 update -qq >&2 || return 1
  fi
}

install_promtool() {
  command -v apt-get >/dev/null 2>&1 || die "promtool not found and apt-get is not available: install Prometheus' promtool and set PROMTOOL"
  ensure_apt_lists || log "apt-get update failed; trying with the lists as they are"
  local tmp
  tmp="$(mktemp -d "$ROOT/.cache/promtool-deb.XXXXXX")"
  # _apt cannot write into a root-owned mktemp dir; the download then runs unsandboxed, which is fine here.
  chmod 755 "$tmp"
  if (cd "$tmp" && apt-get download -q prometheus >&2 2>/dev/null) && dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/root"; then
    rm -rf "$CACHE"
    mkdir -p "$CACHE/usr/bin"
    mv "$tmp/root/usr/bin/promtool" "$CACHE/usr/bin/promtool"
    rm -rf "$tmp"
    log "unpacked promtool into ${CACHE#"$ROOT"/}"
    return 0
  fi
  rm -rf "$tmp"
  log "apt-get download failed; installing the whole 'prometheus' package"
  as_root flock -w 300 /tmp/reviews-bridge-apt.lock env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=60 install -y -q prometheus >&2 || die "could not install promtool"
}

main() {
  local bin
  if ! bin="$(find_promtool)"; then
    mkdir -p "$ROOT/.cache"
    # Parallel test workers may all find it missing: one installs, the others wait and reuse it.
    exec 9>"$ROOT/.cache/promtool.lock"
    flock 9
    if ! bin="$(find_promtool)"; then
      install_promtool
      bin="$(find_promtool)" || die "promtool still not found after installing"
    fi
    flock -u 9
  fi
  if [[ "${1:-}" == "--path" ]]; then
    echo "$bin"
    return 0
  fi
  exec "$bin" "$@"
}

main "$@"
