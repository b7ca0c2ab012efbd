/** The events of a run, as its event log holds them and `runs.<run_id>.events` carries them. */
import { z } from 'zod';
import { ArtifactRefSchema, IdentitySchema, ToolCallSchema, UsageSchema } from './common.js';
import { RunStatusSchema } from './run.js';

const eventBase = {
  run_id: z.string(),
  seq: z.number().int().min(1),
  ts: z.string(),
};
const toolEventBase = {
  ...eventBase,
  call_id: z.string(),
  name: z.string(),
  worker_id: z.string(),
};
const publicError = z.object({
  code: z.string(),
  message: z.string(),
  retryable: z.boolean().optional(),
  details: z.record(z.string(), z.unknown()).optional(),
});

export const RunEventSchema = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('run.accepted'),
    ...eventBase,
    task: z.string(),
    provider: z.string().optional(),
    model: z.string().optional(),
    identity: IdentitySchema.optional(),
    /** Set on a forked run: the run and the event it starts after. */
    forked_from: z.object({ run_id: z.string(), seq: z.number().int() }).optional(),
  }),
  z.object({
    /** The run waits for its tenant's capacity: `position` counts the tenant's waiting runs up to this one. */
    type: z.literal('run.queued'),
    ...eventBase,
    tenant: z.string(),
    priority: z.number().int(),
    position: z.number().int().min(1),
    /**
     * The sequence of the run's submission in the runs stream: the message the run waits as follows it there. A
     * cancel of the waiting run deletes that message from its tenant's queue (absent on older events).
     */
    submit_seq: z.number().int().min(1).optional(),
  }),
  z.object({
    type: z.literal('run.started'),
    ...eventBase,
    planner_id: z.string(),
    resumed: z.boolean().optional(),
    /** The run's effective limits: the planner's configured ones, lowered where the request asked for less. */
    limits: z.record(z.string(), z.number()).optional(),
    /** Limits the request asked to raise above the planner's ceiling: each was held at the ceiling. */
    clamped: z.array(z.object({ field: z.string(), requested: z.number(), ceiling: z.number() })).optional(),
  }),
  z.object({
    type: z.literal('llm.request'),
    ...eventBase,
    iteration: z.number().int(),
    tools: z.array(z.string()),
  }),
  z.object({
    type: z.literal('llm.response'),
    ...eventBase,
    iteration: z.number().int(),
    text: z.string(),
    tool_calls: z.array(ToolCallSchema),
    usage: UsageSchema,
  }),
  z.object({
    type: z.literal('tool.search'),
    ...eventBase,
    query: z.string(),
    strategy: z.string(),
    results: z.array(z.string()),
    native: z.boolean().optional(),
  }),
  z.object({ type: z.literal('tool.started'), ...toolEventBase }),
  z.object({
    type: z.literal('tool.progress'),
    ...toolEventBase,
    message: z.string().optional(),
    data: z.unknown().optional(),
  }),
  z.object({
    type: z.literal('tool.completed'),
    ...toolEventBase,
    elapsed_ms: z.number(),
    is_error: z.boolean(),
    preview: z.string(),
    artifact: ArtifactRefSchema.optional(),
    attempts: z.number().int().optional(),
  }),
  z.object({
    type: z.literal('tool.failed'),
    ...toolEventBase,
    elapsed_ms: z.number(),
    is_error: z.literal(true),
    error: publicError,
    preview: z.string(),
    artifact: ArtifactRefSchema.optional(),
    attempts: z.number().int().optional(),
  }),
  z.object({
    type: z.literal('run.notice'),
    ...eventBase,
    kind: z.string(),
    message: z.string(),
    details: z.record(z.string(), z.unknown()).optional(),
  }),
  z.object({
    type: z.literal('run.completed'),
    ...eventBase,
    status: RunStatusSchema,
    reason: z.string().optional(),
    text: z.string(),
    iterations: z.number().int(),
    tool_calls: z.number().int(),
    usage: UsageSchema,
    /** Present whenever the price of the model is known. */
    cost_usd: z.number().min(0).optional(),
    /** The validated final answer of a run with output_schema. */
    output: z.unknown().optional(),
  }),
  z.object({ type: z.literal('run.failed'), ...eventBase, error: publicError }),
  /** Streamed model output; `reasoning` is thinking text, never part of the final answer. */
  z.object({
    type: z.literal('llm.delta'),
    ...eventBase,
    iteration: z.number().int(),
    kind: z.enum(['text', 'reasoning']),
    text: z.string(),
  }),
  /**
   * A guardrail rule acted (docs/guardrails.md): `block` ends the run (input, output) or fails one call (tools, with
   * its `call_id`); `redact` replaced `count` matches of the turn's text with `[redacted:<rule>]`.
   */
  z.object({
    type: z.literal('guardrail.tripped'),
    ...eventBase,
    rule: z.string(),
    stage: z.enum(['input', 'output', 'tools']),
    action: z.enum(['block', 'redact']),
    call_id: z.string().optional(),
    count: z.number().int().min(1).optional(),
  }),
  /** Something about the run a person should know (e.g. `no_tools`, `unknown_tool_scope`); the run goes on. */
  z.object({ type: z.literal('run.warning'), ...eventBase, code: z.string(), message: z.string() }),
  /** A call waits for a human: decide with a request on `runs.<run_id>.approve`. */
  z.object({
    type: z.literal('approval.requested'),
    ...eventBase,
    approval_id: z.string(),
    call_id: z.string(),
    name: z.string(),
    args: z.unknown(),
    summary: z.string(),
  }),
  z.object({
    type: z.literal('approval.decided'),
    ...eventBase,
    approval_id: z.string(),
    decision: z.enum(['approve', 'deny']),
    by: z.string(),
    reason: z.string().optional(),
  }),
  z.object({ type: z.literal('run.input'), ...eventBase, text: z.string() }),
  z.object({ type: z.literal('run.paused'), ...eventBase }),
  z.object({ type: z.literal('run.resumed'), ...eventBase }),
  z.object({
    type: z.literal('session.compacted'),
    ...eventBase,
    before_tokens: z.number().int(),
    after_tokens: z.number().int(),
  }),
  /** A child run started by agent.run / agent.spawn (in the parent's stream). */
  z.object({ type: z.literal('agent.started'), ...eventBase, call_id: z.string(), child_run_id: z.string() }),
  z.object({
    type: z.literal('agent.completed'),
    ...eventBase,
    call_id: z.string(),
    child_run_id: z.string(),
    status: z.string(),
  }),
  /** One skill match pass (every turn while matching is on), zero candidates included. */
  z.object({
    type: z.literal('skill.matched'),
    ...eventBase,
    candidates: z.array(z.object({ name: z.string(), score: z.number() })),
  }),
  z.object({
    type: z.literal('skill.activated'),
    ...eventBase,
    name: z.string(),
    score: z.number(),
    reason: z.string(),
  }),
  z.object({ type: z.literal('skill.deactivated'), ...eventBase, name: z.string() }),
  /** The tools the active skills leave the model (meta-tools aside); sent whenever the set changes. */
  z.object({ type: z.literal('skill.scoped_tools'), ...eventBase, names: z.array(z.string()) }),
  /** A daemon finished a turn without tool calls and waits for a wake source. */
  z.object({ type: z.literal('daemon.idle'), ...eventBase, queue_depth: z.number().int().min(0) }),
  z.object({
    type: z.literal('daemon.woken'),
    ...eventBase,
    reason: z.enum(['trigger', 'input', 'timer']),
    trigger: z.record(z.string(), z.unknown()).optional(),
  }),
]);

export type RunEvent = z.infer<typeof RunEventSchema>;
export type RunEventType = RunEvent['type'];
export type RunEventOf<T extends RunEventType> = Extract<RunEvent, { type: T }>;
/** A run event before the planner stamps it with run_id, seq and ts. */
export type RunEventBody = RunEvent extends infer E
  ? E extends RunEvent
    ? Omit<E, 'run_id' | 'seq' | 'ts'>
    : never
  : never;

export const TERMINAL_EVENT_TYPES: ReadonlySet<string> = new Set(['run.completed', 'run.failed']);
