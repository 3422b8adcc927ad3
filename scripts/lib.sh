# shellcheck shell=bash
# Common shell functions of scripts/*.sh (sourced, never run). A script sets LOG_NAME (its prefix in log lines)
# and, if it takes a PORT argument, DEFAULT_PORT before sourcing:
#   LOG_NAME=kafka DEFAULT_PORT=39092
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# Provides: ROOT (the repository), log, die, usage, parse_clean (--clean argument), port_arg, base_arg,
# port_listening, free_port, free_base, who_listens, pid_of (pid-file check), stop_pid, ensure_tool, apt_install,
# wait_until.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Progress and errors go to stderr so that a verb's stdout stays machine-readable (status, free ports).
log() { printf '%s: %s\n' "${LOG_NAME:-script}" "$*" >&2; }
die() {
  printf '%s: ERROR: %s\n' "${LOG_NAME:-script}" "$*" >&2
  exit 1
}

# Prints the calling script's header comment (its usage) and exits 2.
usage() {
  sed -n '2,/^set -euo/{/^#/p}' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# Splits --clean from the other arguments: sets CLEAN (yes|no) and ARGS (the rest, in order). Callers then
# `set -- "${ARGS[@]+"${ARGS[@]}"}"` (a function cannot replace its caller's positional parameters).
parse_clean() {
  CLEAN=no
  ARGS=()
  local a
  for a in "$@"; do
    case "$a" in
      --clean) CLEAN=yes ;;
      *) ARGS+=("$a") ;;
    esac
  done
}

# A TCP port given on the command line, DEFAULT_PORT when empty.
port_arg() {
  local port="${1:-${DEFAULT_PORT:-}}"
  [[ "$port" =~ ^[0-9]+$ && "$port" -ge 1 && "$port" -le 65535 ]] || die "invalid port '$port'"
  echo "$port"
}

# The first port of a topology that uses several consecutive ports after it.
base_arg() {
  local base="${1:-${DEFAULT_BASE:-}}"
  [[ "$base" =~ ^[0-9]+$ && "$base" -ge 1024 && "$base" -le 65500 ]] || die "invalid base port '$base'"
  echo "$base"
}

# True when something accepts TCP connections on 127.0.0.1:$1 (bash's /dev/tcp: no nc needed).
port_listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# A port the kernel just handed out as free (node is always there: the project needs it).
free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
# PORT when nothing listens on it, else a free port (a demo beside a developer's own services must not collide).
port_or_free() {
  node -e 'const p=Number(process.argv[1]);const s=require("net").createServer();s.once("error",()=>{const t=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(t.address().port);t.close()})});s.listen(p,"127.0.0.1",()=>{console.log(p);s.close()})' "$1"
}

# COUNT consecutive free ports (and, with BUS, their Redis Cluster bus ports at +10000), from a random base.
free_base() {
  node -e '
    const net = require("net");
    const [count, bus] = process.argv.slice(1).map(Number);
    const free = (p) => new Promise((ok) => { const s = net.createServer(); s.once("error", () => ok(false)); s.listen(p, "127.0.0.1", () => s.close(() => ok(true))); });
    (async () => {
      for (let i = 0; i < 50; i++) {
        const base = 20000 + Math.floor(Math.random() * 20000);
        const ports = [...Array(count).keys()].map((k) => base + k);
        if (bus) ports.push(...ports.map((p) => p + 10000));
        if ((await Promise.all(ports.map(free))).every(Boolean)) { console.log(base); return; }
      }
      process.exit(1);
    })();' "$1" "${2:-0}"
}

# "name (pid N)" of the process listening on port $1, empty when unknown.
who_listens() { ss -ltnpH "sport = :$1" 2>/dev/null | sed -n 's/.*users:(("\([^"]*\)",pid=\([0-9]*\).*/\1 (pid \2)/p' | head -1; }

# Prints the pid of pid file $1 when it names a live process whose command line matches the regex $2; a stale
# file or a recycled pid (another program now) fails.
pid_of() {
  local file="$1" pattern="$2" pid
  [[ -f "$file" ]] || return 1
  pid="$(cat "$file")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$pattern" || return 1
  echo "$pid"
}

# Sends signal $2 (TERM) to pid $1 and waits up to $3 seconds (20) for it to exit, then SIGKILLs it.
stop_pid() {
  local pid="$1" signal="${2:-TERM}" seconds="${3:-20}"
  kill "-$signal" "$pid" 2>/dev/null || true
  wait_until $((seconds * 10)) eval "! kill -0 $pid 2>/dev/null" && return 0
  log "pid $pid still alive after $seconds s, sending SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  wait_until 50 eval "! kill -0 $pid 2>/dev/null" || true
}

# Runs the command "${@:2}" every 0.1 s until it succeeds, at most $1 times; fails when it never did.
wait_until() {
  local tries="$1"
  shift
  for _ in $(seq "$tries"); do
    "$@" && return 0
    sleep 0.1
  done
  return 1
}

# Makes sure a command exists; a bare Debian (root, apt-get) gets it from its package, anything else fails.
ensure_tool() {
  local tool="$1" package="$2"
  command -v "$tool" >/dev/null && return 0
  if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null; then die "$tool not found (install $package)"; fi
  log "$tool not found; installing Debian's $package"
  export DEBIAN_FRONTEND=noninteractive
  apt_install "$package" || die "apt-get install $package failed"
  command -v "$tool" >/dev/null || die "$tool still not found after installing $package"
}

# apt-get update + install, one at a time: tests start topologies in parallel, and the machine's own apt may hold
# its locks at boot. Our installs queue on a lock file of their own; apt's locks are waited for (DPkg::Lock::Timeout)
# and a run that still met one is retried, for up to about five minutes in all.
apt_install() {
  local attempt
  for attempt in 1 2 3 4 5 6; do
    if flock -w 300 /tmp/reviews-bridge-apt.lock bash -c \
      'apt-get -o DPkg::Lock::Timeout=60 update -qq && apt-get -o DPkg::Lock::Timeout=60 install -y -qq "$1"' \
      _ "$@" >&2; then
      return 0
    fi
    log "apt-get install $* failed (attempt $attempt); retrying in 10 s"
    sleep 10
  done
  return 1
}
