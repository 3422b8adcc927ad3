// Writes schemas/*.v1.json from the zod event definitions (npm run schemas). With --release, also copies the
// schemas the bridge registers in a schema registry (both wire formats) to schemas/released/: the contract of the
// last release, which the evolution test checks every later change against (docs/compatibility.md).
import { mkdirSync, writeFileSync } from 'node:fs';
import { releasedSchemaFiles, renderSchemas } from '../src/core/json-schemas.js';

for (const [name, text] of renderSchemas()) {
  writeFileSync(new URL(`../schemas/${name}`, import.meta.url), text);
  console.log(`wrote schemas/${name}`);
}
if (process.argv.includes('--release')) {
  mkdirSync(new URL('../schemas/released/', import.meta.url), { recursive: true });
  for (const [name, text] of releasedSchemaFiles()) {
    writeFileSync(new URL(`../schemas/released/${name}`, import.meta.url), text);
    console.log(`wrote schemas/released/${name}`);
  }
}
