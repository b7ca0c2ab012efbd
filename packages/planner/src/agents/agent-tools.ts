import {
  OutputSchemaSchema,
  NonEmptyToolPatternListSchema,
  PartialRunLimitsSchema,
  ScriptedTurnSchema,
  ToolSpecSchema,
  matchesAnyToolPattern,
  type ToolSpec,
} from '@agentmesh/protocol';
import { z } from 'zod';
import type { SubagentConfig } from './child-rules.js';

/** The meta-tools that start and steer child runs; the planner answers them itself. */
export const AGENT_TOOL_NAMES = [
  'agent.run',
  'agent.spawn',
  'agent.wait',
  'agent.send_input',
  'agent.cancel',
  'agent.list',
] as const;
export type AgentToolName = (typeof AGENT_TOOL_NAMES)[number];

export function isAgentTool(name: string): name is AgentToolName {
  return (AGENT_TOOL_NAMES as readonly string[]).includes(name);
}

/**
 * Arguments of agent.run and agent.spawn. `approvals.require` adds approval requirements to the ones the child
 * inherits from its parent. `script` (refused unless the parent is scripted) lets demos and tests script a child.
 */
export const ChildArgsSchema = z
  .object({
    task: z.string().trim().min(1),
    tools: NonEmptyToolPatternListSchema.optional(),
    system: z.string().optional(),
    limits: PartialRunLimitsSchema.optional(),
    output_schema: OutputSchemaSchema.optional(),
    approvals: z.object({ require: NonEmptyToolPatternListSchema.optional() }).strict().optional(),
    script: z.array(ScriptedTurnSchema).optional(),
  })
  .strict();
export type ChildArgs = z.infer<typeof ChildArgsSchema>;

export const WaitArgsSchema = z
  .object({
    run_ids: z.array(z.string().min(1)).min(1),
    timeout_ms: z.number().int().min(0).max(86_400_000).optional(),
  })
  .strict();
export const SendInputArgsSchema = z.object({ run_id: z.string().min(1), text: z.string().min(1) }).strict();
export const RunIdArgsSchema = z.object({ run_id: z.string().min(1) }).strict();
export const NoArgsSchema = z.object({}).strict();

const CHILD_INPUT = {
  type: 'object',
  properties: {
    task: { type: 'string', description: 'what the child agent should do, self-contained' },
    tools: {
      type: 'array',
      items: { type: 'string' },
      description: 'tool names or namespaces for the child (within yours; default: all of yours)',
    },
    system: { type: 'string', description: 'system prompt of the child' },
    limits: {
      type: 'object',
      description:
        'max_iterations, max_tool_calls, timeout_ms, max_tokens, tool_concurrency (capped by your own limits ' +
        'and remaining budget)',
    },
    output_schema: {
      type: 'object',
      description:
        'a JSON Schema the child answer must match (pattern, patternProperties and format "regex" are refused)',
    },
    approvals: {
      type: 'object',
      properties: { require: { type: 'array', items: { type: 'string' } } },
      description: 'tool names or globs whose calls by the child wait for approval (added to yours)',
    },
  },
  required: ['task'],
};

const RUN_ID_INPUT = {
  type: 'object',
  properties: { run_id: { type: 'string', description: 'a child run id from agent.spawn or agent.list' } },
  required: ['run_id'],
  additionalProperties: false,
};

const DESCRIPTIONS: Record<AgentToolName, { description: string; input_schema: Record<string, unknown> }> = {
  'agent.run': {
    description:
      'Hands a sub-task to a child agent and waits for its answer: its final text, or its JSON output when ' +
      'output_schema is given. Several agent.run calls in one turn run in parallel.',
    input_schema: CHILD_INPUT,
  },
  'agent.spawn': {
    description:
      'Starts a child agent like agent.run but returns {run_id} at once; collect its answer with agent.wait.',
    input_schema: CHILD_INPUT,
  },
  'agent.wait': {
    description: "Waits for child runs to finish (or timeout_ms) and returns each one's status and answer.",
    input_schema: {
      type: 'object',
      properties: {
        run_ids: { type: 'array', items: { type: 'string' } },
        timeout_ms: { type: 'integer', minimum: 0 },
      },
      required: ['run_ids'],
      additionalProperties: false,
    },
  },
  'agent.send_input': {
    description: 'Sends a message to a running child run; it reads it between its turns.',
    input_schema: {
      type: 'object',
      properties: { run_id: { type: 'string' }, text: { type: 'string' } },
      required: ['run_id', 'text'],
      additionalProperties: false,
    },
  },
  'agent.cancel': { description: 'Cancels a child run (and its own children).', input_schema: RUN_ID_INPUT },
  'agent.list': {
    description: 'Lists the child runs of this run with their status.',
    input_schema: { type: 'object', properties: {}, additionalProperties: false },
  },
};

/** The agent.* tools as specs, so a run's exposure offers them like always-loaded tools. */
export const AGENT_TOOL_SPECS: readonly ToolSpec[] = AGENT_TOOL_NAMES.map((name) =>
  ToolSpecSchema.parse({
    name,
    description: DESCRIPTIONS[name].description,
    namespace: 'agent',
    input_schema: DESCRIPTIONS[name].input_schema,
    safety: {},
    timeout_ms: 86_400_000,
    retry: {
      max_attempts: 1,
      timeout_ms: 86_400_000,
      retry_on: [],
      backoff_ms: 0,
      max_backoff_ms: 0,
      jitter: 0,
    },
    idempotent: false,
    loading: 'always',
  }),
);

/**
 * The agent.* tools a run is offered: those its allow-list selects (the `agent` namespace selects all), or all of
 * them when the configuration enables sub-agents.
 */
export function offeredAgentTools(
  tools: readonly string[] | undefined,
  config: SubagentConfig = {},
): ToolSpec[] {
  if (config.enabled === true) return [...AGENT_TOOL_SPECS];
  if (tools === undefined) return [];
  return AGENT_TOOL_SPECS.filter((spec) => matchesAnyToolPattern(spec.name, tools));
}
