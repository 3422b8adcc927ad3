#!/usr/bin/env -S node --max-semi-space-size=16 --max-old-space-size=256
// The installed command: runs the compiled CLI (npm run build makes dist/). The Node flags are the container
// image's (see the Dockerfile's ENTRYPOINT): they keep a 1M-review account under 256 MiB of RSS on Node 24.
import '../dist/src/cli.js';
