import { z } from 'zod';
import { PUBLIC_SCHEMAS } from './schemas.js';

/**
 * JSON Schema (draft 2020-12) for every public message, for clients in other languages. The files in
 * `packages/protocol/schemas/` are generated from this (`npm run gen:schemas`) and a test keeps them in sync.
 * Input shapes are used: fields with defaults are optional, as a client sends them.
 */
export function generateJsonSchemas(): Record<string, Record<string, unknown>> {
  const out: Record<string, Record<string, unknown>> = {};
  for (const [name, schema] of Object.entries(PUBLIC_SCHEMAS)) {
    const json = z.toJSONSchema(schema as z.ZodType, {
      io: 'input',
      unrepresentable: 'any',
      target: 'draft-2020-12',
    });
    out[name] = { $id: `https://agentmesh.dev/schemas/${name}.json`, title: name, ...json };
  }
  return out;
}
