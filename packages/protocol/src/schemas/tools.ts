/** Tools: their specs and policies, invocations, outcomes and progress. */
import { z } from 'zod';
import { ArtifactRefSchema, ErrorPayloadSchema, IdentitySchema, ToolNameSchema } from './common.js';

export const ToolSafetySchema = z
  .object({
    read_only: z.boolean().default(false),
    mutating: z.boolean().default(false),
    networked: z.boolean().default(false),
    filesystem: z.boolean().default(false),
    process: z.boolean().default(false),
    external_spend: z.boolean().default(false),
    needs_confirmation: z.boolean().default(false),
  })
  .strict();
export type ToolSafety = z.infer<typeof ToolSafetySchema>;

export const RetryClassSchema = z.enum(['transient', 'timeout', '5xx', 'permanent']);
export type RetryClass = z.infer<typeof RetryClassSchema>;

export const RetryPolicySchema = z
  .object({
    max_attempts: z.number().int().min(1).max(20),
    timeout_ms: z.number().int().min(1),
    retry_on: z.array(RetryClassSchema),
    backoff_ms: z.number().int().min(0),
    max_backoff_ms: z.number().int().min(0),
    jitter: z.number().min(0).max(1),
  })
  .strict();
export type RetryPolicy = z.infer<typeof RetryPolicySchema>;

export const ToolLoadingSchema = z.enum(['always', 'deferred']);
export type ToolLoading = z.infer<typeof ToolLoadingSchema>;

/** A tool as workers register it and the catalog serves it. Schemas are JSON Schema (draft 2020-12). */
export const ToolSpecSchema = z
  .object({
    name: ToolNameSchema,
    version: z.string().min(1).default('1'),
    description: z.string().min(1),
    namespace: z.string(),
    input_schema: z.record(z.string(), z.unknown()),
    output_schema: z.record(z.string(), z.unknown()).optional(),
    safety: ToolSafetySchema,
    timeout_ms: z.number().int().min(1),
    retry: RetryPolicySchema,
    idempotent: z.boolean(),
    loading: ToolLoadingSchema,
    cpu_bound: z.boolean().default(false),
    tags: z.array(z.string()).default([]),
  })
  .strict();
export type ToolSpec = z.infer<typeof ToolSpecSchema>;
export type ToolSpecInput = z.input<typeof ToolSpecSchema>;

/** A request to run one tool call, sent on `tool.invoke.<name>`. */
export const ToolInvocationSchema = z
  .object({
    call_id: z.string().min(1),
    tool: ToolNameSchema,
    arguments: z.unknown(),
    run_id: z.string().min(1),
    identity: IdentitySchema.default({ tenant: 'default' }),
    attempt: z.number().int().min(1).default(1),
    /** run id + call id: a worker that already ran this key answers with the recorded outcome. */
    idempotency_key: z.string().optional(),
    timeout_ms: z.number().int().min(1).optional(),
    max_output_bytes: z.number().int().min(256).optional(),
    /** When set, the worker publishes tool.started / tool.progress notices here. */
    progress_subject: z.string().optional(),
  })
  .strict();
export type ToolInvocation = z.infer<typeof ToolInvocationSchema>;
export type ToolInvocationInput = z.input<typeof ToolInvocationSchema>;

/** The answer to a ToolInvocation. `is_error` outcomes are results the model sees, not transport failures. */
export const ToolOutcomeSchema = z.object({
  call_id: z.string(),
  tool: z.string(),
  worker_id: z.string(),
  is_error: z.boolean(),
  output: z.unknown().optional(),
  error: ErrorPayloadSchema.optional(),
  /** The text the model sees: the output formatted and capped, or the error message. */
  preview: z.string(),
  artifact: ArtifactRefSchema.optional(),
  elapsed_ms: z.number(),
  attempts: z.number().int().min(1),
  replayed: z.boolean().optional(),
  /**
   * `shared`: the worker ran (or refused) this non-idempotent call under a claim on its idempotency key in a store all
   * replicas share, so the same call re-sent to any replica is answered from that store instead of running again.
   */
  dedup: z.literal('shared').optional(),
});
export type ToolOutcome = z.infer<typeof ToolOutcomeSchema>;

/** What a worker publishes on an invocation's progress subject. */
export const ToolProgressSchema = z.object({
  kind: z.enum(['started', 'progress', 'heartbeat']),
  call_id: z.string(),
  tool: z.string(),
  worker_id: z.string(),
  message: z.string().optional(),
  data: z.unknown().optional(),
  /** On `started`: the call is deduplicated by its idempotency key across replicas (see `ToolOutcome.dedup`). */
  dedup: z.literal('shared').optional(),
});
export type ToolProgress = z.infer<typeof ToolProgressSchema>;

/**
 * What a worker that turned calls of a tool away (or was full) publishes on `<prefix>.tool.capacity.<tool>` once it
 * can take `free` more: callers waiting to send a call of that tool again send it to `invoke`, the subject of this
 * worker alone, instead of waiting out their backoff.
 */
export const ToolCapacitySchema = z
  .object({
    worker_id: z.string().min(1),
    tool: z.string().min(1),
    invoke: z.string().min(1),
    free: z.number().int().min(1),
  })
  .strict();
export type ToolCapacity = z.infer<typeof ToolCapacitySchema>;
