import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { generateJsonSchemas } from './json-schemas.js';

const dir = join(import.meta.dirname, '..', 'schemas');

describe('JSON Schema files for other languages', () => {
  const generated = generateJsonSchemas();

  it('are in sync with the zod schemas (run `npm run gen:schemas` after changing a schema)', () => {
    const files = readdirSync(dir).filter((f) => f.endsWith('.json'));
    expect(files.map((f) => f.replace(/\.json$/, '')).sort()).toEqual(Object.keys(generated).sort());
    for (const [name, schema] of Object.entries(generated)) {
      const onDisk = JSON.parse(readFileSync(join(dir, `${name}.json`), 'utf8')) as unknown;
      expect(onDisk, `${name}.json is stale`).toEqual(JSON.parse(JSON.stringify(schema)));
    }
  });

  it('accept a minimal RunRequest and reject one without a task, as the zod schema does', () => {
    const ajv = new Ajv2020({ strict: false, validateFormats: false });
    const validate = ajv.compile(generated['RunRequest']!);
    expect(validate({ task: 'add 2 and 3', tools: ['math'] })).toBe(true);
    expect(validate({ tools: ['math'] })).toBe(false);
    expect(validate({ task: 'x', unknown_field: 1 })).toBe(false);
  });
});
