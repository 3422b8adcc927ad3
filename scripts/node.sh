# shellcheck shell=bash
# Sourced by scripts/test.sh and scripts/demo.sh (after they cd to the repository root): makes everything the
# script runs afterwards (npm ci, tsc, eslint, vitest, tsx and every process they start) run on Node 24 LTS.
#   use_node24            when the machine's `node` is older than 24, puts Node $NODE24_VERSION first on PATH,
#                         fetched once as the npm registry package node-linux-<arch> into .cache/node/ (git-ignored)
#   install_dependencies  npm ci when node_modules is missing, older than package-lock.json, or was installed by
#                         another Node ABI (native optional addons such as cpu-features are built per ABI)
# The registry package holds only the node binary and its headers, no npm: the machine's npm runs on it (npm's
# launcher is `#!/usr/bin/env node`, and npm run keeps PATH). Keep the Dockerfile's base image on the same version.
NODE24_VERSION=24.21.0
NODE24_HOME= # the fetched Node's folder once use_node24 switched to it

use_node24() {
  local major
  major="$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)"
  if ((major >= 24)); then
    return 0
  fi
  local arch
  case "$(uname -m)" in
    x86_64) arch=x64 ;;
    aarch64) arch=arm64 ;;
    *)
      echo "node.sh: Node $(node --version 2>/dev/null || echo '(none)') is older than 24 and no node-linux package is known for $(uname -m)" >&2
      return 1
      ;;
  esac
  local dir="$PWD/.cache/node/v$NODE24_VERSION-linux-$arch"
  if [[ ! -x "$dir/bin/node" ]]; then
    printf '\n==> fetching Node %s (npm package node-linux-%s@%s) into %s\n' "$NODE24_VERSION" "$arch" "$NODE24_VERSION" "$dir" >&2
    local tmp
    mkdir -p .cache/node
    tmp="$(mktemp -d "$PWD/.cache/node/fetch.XXXXXX")"
    # npm pack checks the tarball against the registry's integrity hash; extracting apart and renaming keeps
    # concurrent runs from seeing half a Node.
    if ! (npm pack --silent --pack-destination "$tmp" "node-linux-$arch@$NODE24_VERSION" >/dev/null &&
      tar -xzf "$tmp"/node-linux-"$arch"-*.tgz -C "$tmp" && "$tmp/package/bin/node" --version >/dev/null); then
      rm -rf "$tmp"
      echo "node.sh: could not fetch node-linux-$arch@$NODE24_VERSION from the npm registry" >&2
      return 1
    fi
    mv -T "$tmp/package" "$dir" 2>/dev/null || true # another run may have put it there first
    rm -rf "$tmp"
  fi
  export PATH="$dir/bin:$PATH"
  NODE24_HOME="$dir"
  hash -r
}

install_dependencies() {
  local abi
  abi="$(node -p process.versions.modules)"
  if [[ ! -f node_modules/.package-lock.json || package-lock.json -nt node_modules/.package-lock.json ||
    "$(cat node_modules/.node-abi 2>/dev/null)" != "$abi" ]]; then
    printf '\n==> npm ci (Node %s)\n' "$(node --version)" >&2
    # node-gyp builds native addons against the fetched Node's headers (shipped in its package), not the machine's.
    env ${NODE24_HOME:+npm_config_nodedir="$NODE24_HOME"} npm ci --no-audit --no-fund
    echo "$abi" >node_modules/.node-abi
  fi
}
