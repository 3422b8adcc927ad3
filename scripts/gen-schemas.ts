// Writes schemas/*.v1.json from the zod event definitions (npm run schemas).
import { writeFileSync } from 'node:fs';
import { renderSchemas } from '../src/core/json-schemas.js';

for (const [name, text] of renderSchemas()) {
  writeFileSync(new URL(`../schemas/${name}`, import.meta.url), text);
  console.log(`wrote schemas/${name}`);
}
