import { z } from 'zod';
import { ConfigSchema } from './config.js';

/** Where the generated JSON Schema of the configuration file lives, from the repository root. */
export const CONFIG_SCHEMA_PATH = 'docs/reference/agentmesh.config.schema.json';

/**
 * The JSON Schema (draft 2020-12) of `agentmesh.yaml`, generated from the zod schema the CLI validates it with, for
 * editors (`# yaml-language-server: $schema=...`) and other tools. `npm run docs -w packages/cli` rewrites
 * {@link CONFIG_SCHEMA_PATH}; a test fails while it differs.
 */
export function configJsonSchema(): Record<string, unknown> {
  const json = z.toJSONSchema(ConfigSchema, { io: 'input', unrepresentable: 'any', target: 'draft-2020-12' });
  return {
    $id: 'https://agentmesh.dev/schemas/agentmesh.config.schema.json',
    title: 'agentmesh configuration (agentmesh.yaml)',
    ...json,
  };
}
