#!/usr/bin/env node
// The installed command: runs the compiled CLI (npm run build makes dist/).
import '../dist/src/cli.js';
