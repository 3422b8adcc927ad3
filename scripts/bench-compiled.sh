#!/usr/bin/env bash
# Runs a benchmark on the compiled build, as the image runs the bridge (node on tsc's output), instead of under tsx:
# tsx's transform keeps function names by wrapping closures (esbuild's __name), a cost the product does not pay.
# Usage: scripts/bench-compiled.sh bench/cpu.ts [args...]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/node.sh
use_node24
bench="${1:?usage: scripts/bench-compiled.sh bench/<name>.ts [args...]}"
shift
out=.run/bench-dist
rm -rf "$out"
npx --no-install tsc -p tsconfig.json --outDir "$out" --noEmit false --declaration false --sourceMap false
mkdir -p "$out/src/redis"
cp -r src/redis/lua "$out/src/redis/"
exec node "$out/${bench%.ts}.js" "$@"
