import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { CONFIG_SCHEMA_PATH, configJsonSchema } from './config-schema.js';

const committed = () =>
  JSON.parse(readFileSync(new URL(`../../../${CONFIG_SCHEMA_PATH}`, import.meta.url), 'utf8')) as object;

describe('the JSON Schema of the configuration file', () => {
  it('matches the zod schema the CLI validates with (run `npm run docs -w packages/cli` after a change)', () => {
    expect(committed()).toEqual(JSON.parse(JSON.stringify(configJsonSchema())));
  });

  it('accepts tenants and refuses a wrong limit, naming the key', () => {
    const validate = new Ajv2020({ strict: false }).compile(committed());
    expect(
      validate({
        tenants: {
          default: { max_concurrent_runs: 0, weight: 1 },
          acme: { max_concurrent_runs: 4, weight: 2 },
        },
      }),
    ).toBe(true);
    expect(validate({ tenants: { acme: { max_concurrent_runs: -1 } } })).toBe(false);
    expect(validate({ tenants: { acme: { max_concurent_runs: 4 } } })).toBe(false);
  });
});
