import { z } from 'zod';
import type { ModelTool } from './providers/types.js';

/** The tools the planner itself answers (artifact_fetch is forwarded to the workers' artifact store). */
export const META_TOOL_NAMES = ['tool_search', 'tool_get', 'artifact_fetch'] as const;
export type MetaToolName = (typeof META_TOOL_NAMES)[number];

export function isMetaTool(name: string): name is MetaToolName {
  return (META_TOOL_NAMES as readonly string[]).includes(name);
}

export const ToolSearchArgsSchema = z
  .object({ query: z.string().min(1), limit: z.number().int().min(1).max(50).optional() })
  .strict();
export const ToolGetArgsSchema = z.object({ name: z.string().min(1) }).strict();
export const ArtifactFetchArgsSchema = z
  .object({
    ref: z.string().min(1),
    offset: z.number().int().min(0).optional(),
    max_bytes: z
      .number()
      .int()
      .min(1)
      .max(1024 * 1024)
      .optional(),
  })
  .strict();

export const META_TOOLS: Record<MetaToolName, ModelTool> = {
  tool_search: {
    name: 'tool_search',
    description:
      'Searches for more tools by what they do. The tools found become callable on your next turn. ' +
      'Use a few keywords, e.g. "hash text" or "read file".',
    input_schema: {
      type: 'object',
      properties: {
        query: { type: 'string', description: 'what the tool should do' },
        limit: { type: 'integer', minimum: 1, maximum: 50, description: 'most tools to return (default 10)' },
      },
      required: ['query'],
      additionalProperties: false,
    },
  },
  tool_get: {
    name: 'tool_get',
    description:
      'Returns the full description and input schema of one tool by name; a deferred tool becomes callable on your next turn.',
    input_schema: {
      type: 'object',
      properties: { name: { type: 'string', description: 'tool name' } },
      required: ['name'],
      additionalProperties: false,
    },
  },
  artifact_fetch: {
    name: 'artifact_fetch',
    description:
      'Reads part of a large tool output that was stored as an artifact (the tool result names its ref). ' +
      'Returns up to max_bytes (default 65536, at most 1048576) starting at offset.',
    input_schema: {
      type: 'object',
      properties: {
        ref: { type: 'string', description: 'the artifact ref from a tool result' },
        offset: { type: 'integer', minimum: 0 },
        max_bytes: { type: 'integer', minimum: 1, maximum: 1048576 },
      },
      required: ['ref'],
      additionalProperties: false,
    },
  },
};
