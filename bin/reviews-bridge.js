#!/usr/bin/env -S node --max-semi-space-size=16
// The installed command: runs the compiled CLI (npm run build makes dist/). Node 24 lets the young generation grow
// to 128 MiB; 16 MiB per semi-space (the default of Node 20) keeps ~100 MiB of RSS off every busy
// process. The container image also caps the old space (NODE_OPTIONS in the Dockerfile; docs/operations.md).
import '../dist/src/cli.js';
