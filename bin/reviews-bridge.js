#!/usr/bin/env node
// The installed command: runs the compiled CLI (npm run build makes dist/). `run` caps Node's heap itself unless
// the command line or NODE_OPTIONS does (src/app/node-flags.ts), so no flags here.
import '../dist/src/cli.js';
