// Writes packages/protocol/schemas/<Message>.json from the zod schemas (run: npm run gen:schemas).
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { generateJsonSchemas } from '../dist/json-schemas.js';

const dir = join(dirname(fileURLToPath(import.meta.url)), '..', 'schemas');
mkdirSync(dir, { recursive: true });
for (const [name, schema] of Object.entries(generateJsonSchemas())) {
  writeFileSync(join(dir, `${name}.json`), JSON.stringify(schema, null, 2) + '\n');
}
console.log(`wrote ${dir}`);
