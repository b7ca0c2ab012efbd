import { z } from 'zod';
import { toolNameProblem } from './names.js';
import { RUN_ID_PATTERN } from './subjects.js';

/** Every message schema of the contract. Types are inferred from these; JSON Schema files are generated from them. */

export const ToolNameSchema = z.string().superRefine((name, ctx) => {
  const problem = toolNameProblem(name);
  if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
});

export const RunIdSchema = z
  .string()
  .regex(RUN_ID_PATTERN, 'run id must be 1-128 characters of letters, digits, "_" or "-"');

export const IdentitySchema = z
  .object({
    tenant: z.string().min(1).max(128).default('default'),
    user: z.string().max(256).optional(),
    session: z.string().max(256).optional(),
  })
  .strict();
export type Identity = z.infer<typeof IdentitySchema>;

export const ErrorPayloadSchema: z.ZodType<{
  code: string;
  message: string;
  retryable: boolean;
  details?: Record<string, unknown> | undefined;
  cause?: unknown;
}> = z.object({
  code: z.string(),
  message: z.string(),
  retryable: z.boolean(),
  details: z.record(z.string(), z.unknown()).optional(),
  cause: z.lazy(() => ErrorPayloadSchema).optional(),
});

export const ProviderKindSchema = z.enum([
  'openai',
  'anthropic',
  'openai-compatible',
  'scripted',
  'openai-responses',
  'openrouter',
  'ollama',
  'vllm',
  'lmstudio',
  'groq',
  'together',
  'deepseek',
  'huggingface',
]);
export type ProviderKind = z.infer<typeof ProviderKindSchema>;
export const ToolSearchStrategySchema = z.enum(['off', 'bm25', 'regex', 'hybrid']);
export type ToolSearchStrategy = z.infer<typeof ToolSearchStrategySchema>;
export const SearchStrategySchema = z.enum(['bm25', 'regex', 'hybrid']);
export type SearchStrategy = z.infer<typeof SearchStrategySchema>;

export const RunLimitsSchema = z
  .object({
    max_iterations: z.number().int().min(1).max(10_000).default(12),
    max_tool_calls: z.number().int().min(0).max(100_000).default(64),
    timeout_ms: z.number().int().min(1).max(86_400_000).default(300_000),
    max_output_bytes: z
      .number()
      .int()
      .min(256)
      .max(16 * 1024 * 1024)
      .default(65_536),
    max_nudges: z.number().int().min(0).max(100).default(2),
    tool_concurrency: z.number().int().min(1).max(256).default(16),
    max_tokens: z.number().int().min(1).optional(),
    max_cost_usd: z.number().min(0).optional(),
  })
  .strict();
export type RunLimits = z.infer<typeof RunLimitsSchema>;

/** One call a model asked for, as the provider reported it (name is canonical when it could be mapped). */
export const ToolCallSchema = z.object({
  id: z.string(),
  name: z.string(),
  arguments: z.unknown(),
});
export type ToolCall = z.infer<typeof ToolCallSchema>;

/** One scripted model turn: text, tool calls, or both. */
export const ScriptedTurnSchema = z
  .object({
    text: z.string().optional(),
    tool_calls: z
      .array(
        z.object({
          id: z.string().optional(),
          name: z.string(),
          arguments: z.union([z.record(z.string(), z.unknown()), z.string()]).default({}),
        }),
      )
      .optional(),
    usage: z.object({ input_tokens: z.number().int(), output_tokens: z.number().int() }).optional(),
    delay_ms: z.number().int().min(0).optional(),
  })
  .strict();
export type ScriptedTurn = z.infer<typeof ScriptedTurnSchema>;

/** Per-run approval policy: adds requirements to the configured `approvals:` (never removes them). */
export const RunApprovalsSchema = z
  .object({
    require: z.array(z.string().min(1)).optional(),
    auto_approve: z.array(z.string().min(1)).optional(),
    timeout_ms: z.number().int().min(0).optional(),
  })
  .strict();
export type RunApprovals = z.infer<typeof RunApprovalsSchema>;

/** A conversation id: 1-128 characters of [A-Za-z0-9._-]. */
export const SessionIdSchema = z
  .string()
  .min(1, 'session id must not be empty')
  .max(128, 'session id must be at most 128 characters')
  .regex(/^[A-Za-z0-9._-]+$/, 'session id may only contain A-Z a-z 0-9 . _ -');

/** A `watch_paths` glob: relative to the workspace root, never absolute, never through `..`. */
export const WatchGlobSchema = z
  .string()
  .min(1)
  .max(512)
  .refine(
    (g) => !g.startsWith('/') && !g.includes('\\'),
    'a watch path is relative to the workspace root (no leading "/" or "\\")',
  )
  .refine((g) => !g.split('/').includes('..'), 'a watch path may not leave the workspace ("..")');

export const RunRequestSchema = z
  .object({
    id: RunIdSchema.optional(),
    task: z.string().trim().min(1, 'task must be a non-empty string'),
    system: z.string().optional(),
    provider: ProviderKindSchema.optional(),
    model: z.string().min(1).optional(),
    base_url: z.string().url().optional(),
    tools: z.array(z.string().min(1)).optional(),
    tool_search: ToolSearchStrategySchema.optional(),
    deferred: z.array(z.string().min(1)).optional(),
    always: z.array(z.string().min(1)).optional(),
    limits: RunLimitsSchema.partial().optional(),
    identity: IdentitySchema.optional(),
    require_successful_tools: z.array(z.string()).optional(),
    stop_after_successful_tools: z.array(z.string()).optional(),
    tool_retries: z.number().int().min(0).max(10).optional(),
    script: z.array(ScriptedTurnSchema).optional(),
    metadata: z.record(z.string(), z.unknown()).optional(),
    /** How tools reach the model: `native` tool calls, or `text` (rendered into the prompt, fenced ```tool_call blocks). */
    tool_protocol: z.enum(['native', 'text']).optional(),
    /** Which calls of this run wait for a human decision (adds to the configured policy). */
    approvals: RunApprovalsSchema.optional(),
    /** Continue this conversation (per tenant); `identity.session` is an alias. */
    session: SessionIdSchema.optional(),
    /** A JSON Schema the final answer must satisfy; run.completed.output holds the validated value. */
    output_schema: z.record(z.string(), z.unknown()).optional(),
    /** Set on a child run started by agent.run / agent.spawn; depth is the child's nesting level (1 = child of a top-level run). */
    parent: z
      .object({
        run_id: z.string().min(1),
        call_id: z.string().min(1),
        depth: z.number().int().min(1).optional(),
      })
      .strict()
      .optional(),
    /** Skills to activate from the first turn; `[]` turns skill matching off for this run. */
    skills: z.array(z.string().min(1).max(128)).max(64).optional(),
    /** A daemon: a text-only turn does not end the run, it idles until a trigger, an input or the timer wakes it. */
    daemon: z
      .object({
        /** Wake the daemon every this many ms while idle (0: no timer). */
        wake_interval_ms: z.number().int().min(0).max(86_400_000).default(0),
        /** End with status `watchdog` after this many timer ticks in a row without a trigger or input (0: never). */
        idle_watchdog: z.number().int().min(0).max(1_000_000).default(0),
        /** Triggers queued at most; a full queue refuses more with `queue_full`. */
        queue_capacity: z.number().int().min(1).max(100_000).default(1000),
        /**
         * Globs relative to the workspace root (`src/**`, `*.md`) that workers with a workspace watch for this daemon,
         * publishing debounced `{kind: "file_changed", paths}` triggers.
         */
        watch_paths: z.array(WatchGlobSchema).min(1).max(32).optional(),
      })
      .strict()
      .optional(),
  })
  .strict();
export type RunRequest = z.infer<typeof RunRequestSchema>;
export type RunRequestInput = z.input<typeof RunRequestSchema>;

export const RunStatusSchema = z.enum([
  'done',
  'stuck',
  'budget_exhausted',
  'failed',
  'cancelled',
  'timeout',
  'watchdog',
]);
export type RunStatus = z.infer<typeof RunStatusSchema>;

export const UsageSchema = z.object({
  input_tokens: z.number().int().min(0),
  output_tokens: z.number().int().min(0),
  cost_usd: z.number().min(0).optional(),
  /** Input tokens served from the provider's prompt cache (part of input_tokens). */
  cache_read_tokens: z.number().int().min(0).optional(),
  /** Input tokens written to the provider's prompt cache (part of input_tokens). */
  cache_write_tokens: z.number().int().min(0).optional(),
  /** Output tokens spent on reasoning (part of output_tokens). */
  reasoning_tokens: z.number().int().min(0).optional(),
  /** On a parent's run.completed: each child run's own usage (already included in the totals above). */
  children: z
    .array(
      z.object({
        run_id: z.string(),
        call_id: z.string(),
        status: z.string(),
        input_tokens: z.number().int().min(0),
        output_tokens: z.number().int().min(0),
        cost_usd: z.number().min(0).optional(),
        tool_calls: z.number().int().min(0).optional(),
      }),
    )
    .optional(),
});
export type Usage = z.infer<typeof UsageSchema>;

export const ArtifactRefSchema = z.object({
  ref: z.string(),
  mime: z.string(),
  size: z.number().int().min(0),
});
export type ArtifactRef = z.infer<typeof ArtifactRefSchema>;

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
  }),
  z.object({
    type: z.literal('run.started'),
    ...eventBase,
    planner_id: z.string(),
    resumed: z.boolean().optional(),
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

/** A trigger for a daemon run (`runs.<run_id>.trigger`): a kind and any payload. */
export const TriggerSchema = z
  .object({ kind: z.string().trim().min(1, 'kind must be a non-empty string').max(128) })
  .catchall(z.unknown());
export type Trigger = z.infer<typeof TriggerSchema>;
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

export const CancelRequestSchema = z.object({ reason: z.string().optional() }).strict();
export type CancelRequest = z.infer<typeof CancelRequestSchema>;

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

export const CatalogRegisterSchema = z
  .object({
    worker_id: z.string().min(1),
    tools: z.array(ToolSpecSchema),
    ttl_ms: z.number().int().min(100).optional(),
  })
  .strict();
export type CatalogRegister = z.infer<typeof CatalogRegisterSchema>;

export const CatalogRegisterReplySchema = z.object({
  accepted: z.array(z.string()),
  rejected: z.array(z.object({ name: z.string(), error: ErrorPayloadSchema })),
  ttl_ms: z.number().int(),
});
export type CatalogRegisterReply = z.infer<typeof CatalogRegisterReplySchema>;

export const CatalogDeregisterSchema = z.object({ worker_id: z.string().min(1) }).strict();
export type CatalogDeregister = z.infer<typeof CatalogDeregisterSchema>;

export const CatalogHeartbeatSchema = z.object({ worker_id: z.string().min(1) }).strict();
export type CatalogHeartbeat = z.infer<typeof CatalogHeartbeatSchema>;
/** `known: false` tells a worker the catalog forgot it (expired): it must register again. */
export const CatalogHeartbeatReplySchema = z.object({ known: z.boolean() });

export const ToolSummarySchema = z.object({
  name: z.string(),
  version: z.string(),
  namespace: z.string(),
  description: z.string(),
  loading: ToolLoadingSchema,
  workers: z.number().int(),
});
export type ToolSummary = z.infer<typeof ToolSummarySchema>;

const catalogScope = {
  /** A run's allow-list: canonical names, namespace prefixes or globs. Absent means every tool. */
  allow: z.array(z.string()).optional(),
  /** Names or globs made deferred for this request (overrides the spec). */
  deferred: z.array(z.string()).optional(),
  /** Names or globs made always-loaded (wins over deferred). */
  always: z.array(z.string()).optional(),
};

export const CatalogListSchema = z
  .object({
    ...catalogScope,
    namespace: z.string().optional(),
    loading: ToolLoadingSchema.optional(),
    text: z.string().optional(),
    full: z.boolean().optional(),
    /** Skip this many matching tools (paging; tools are sorted by name). */
    offset: z.number().int().min(0).optional(),
    /** Return at most this many; without it the reply holds as many as fit in one message. */
    limit: z.number().int().min(1).optional(),
  })
  .strict();
export type CatalogList = z.infer<typeof CatalogListSchema>;
export const CatalogListReplySchema = z.object({
  tools: z.array(ToolSummarySchema),
  specs: z.array(ToolSpecSchema).optional(),
  /** How many tools matched in all. */
  total: z.number().int().optional(),
  /** Present when more tools matched than this reply holds: ask again with this offset. */
  next_offset: z.number().int().optional(),
});
export type CatalogListReply = z.infer<typeof CatalogListReplySchema>;

export const CatalogGetSchema = z.object({ name: z.string().min(1), ...catalogScope }).strict();
export type CatalogGet = z.infer<typeof CatalogGetSchema>;
export const CatalogGetReplySchema = z.object({ tool: ToolSpecSchema, workers: z.array(z.string()) });
export type CatalogGetReply = z.infer<typeof CatalogGetReplySchema>;

export const CatalogSearchSchema = z
  .object({
    ...catalogScope,
    query: z.string(),
    strategy: SearchStrategySchema.default('bm25'),
    limit: z.number().int().default(10),
    /** Only deferred tools (what a model searches for); default true. */
    deferred_only: z.boolean().optional(),
  })
  .strict();
export type CatalogSearch = z.infer<typeof CatalogSearchSchema>;
export type CatalogSearchInput = z.input<typeof CatalogSearchSchema>;
export const CatalogSearchReplySchema = z.object({
  results: z.array(z.object({ name: z.string(), score: z.number(), description: z.string() })),
  strategy: SearchStrategySchema,
  limit: z.number().int(),
});
export type CatalogSearchReply = z.infer<typeof CatalogSearchReplySchema>;

export const ArtifactFetchSchema = z
  .object({
    ref: z.string().min(1),
    offset: z.number().int().min(0).default(0),
    max_bytes: z.number().int().min(1).default(65_536),
    identity: IdentitySchema.default({ tenant: 'default' }),
  })
  .strict();
export type ArtifactFetch = z.infer<typeof ArtifactFetchSchema>;
export const ArtifactFetchReplySchema = z.object({
  ref: z.string(),
  mime: z.string(),
  size: z.number().int(),
  offset: z.number().int(),
  text: z.string(),
  eof: z.boolean(),
});
export type ArtifactFetchReply = z.infer<typeof ArtifactFetchReplySchema>;

/** Every schema that gets a JSON Schema file for clients in other languages. */
export const PUBLIC_SCHEMAS = {
  RunRequest: RunRequestSchema,
  RunEvent: RunEventSchema,
  CancelRequest: CancelRequestSchema,
  ToolSpec: ToolSpecSchema,
  ToolInvocation: ToolInvocationSchema,
  ToolOutcome: ToolOutcomeSchema,
  ToolProgress: ToolProgressSchema,
  CatalogRegister: CatalogRegisterSchema,
  CatalogRegisterReply: CatalogRegisterReplySchema,
  CatalogDeregister: CatalogDeregisterSchema,
  CatalogHeartbeat: CatalogHeartbeatSchema,
  CatalogList: CatalogListSchema,
  CatalogListReply: CatalogListReplySchema,
  CatalogGet: CatalogGetSchema,
  CatalogGetReply: CatalogGetReplySchema,
  CatalogSearch: CatalogSearchSchema,
  CatalogSearchReply: CatalogSearchReplySchema,
  ArtifactFetch: ArtifactFetchSchema,
  ArtifactFetchReply: ArtifactFetchReplySchema,
  ErrorPayload: ErrorPayloadSchema,
} as const;

/**
 * A worker says some of its tools cannot run right now (`available: false`, e.g. their MCP server is reconnecting)
 * or can again. Every catalog replica hears it; a tool none of whose workers can run it is left out of search, `get`
 * answers `tool_unavailable` (retryable), and it stays listed, so a call already offered gets `tool_unavailable`
 * from its worker, which the model can retry.
 */
export const CatalogAvailabilitySchema = z
  .object({
    worker_id: z.string().min(1),
    tools: z.array(z.string().min(1)),
    available: z.boolean(),
  })
  .strict();
export type CatalogAvailability = z.infer<typeof CatalogAvailabilitySchema>;

/** A human's decision on `runs.<run_id>.approve`; the reply is `{ ok: true }` or `not_found` / `already_decided`. */
export const ApprovalDecisionSchema = z
  .object({
    approval_id: z.string().min(1).max(128),
    decision: z.enum(['approve', 'deny']),
    reason: z.string().max(4_096).optional(),
    by: z.string().max(256).optional(),
  })
  .strict();
export type ApprovalDecision = z.infer<typeof ApprovalDecisionSchema>;

/** A user message added to a running run (`runs.<run_id>.input`), applied before its next model turn. */
export const RunInputSchema = z.object({ text: z.string().min(1).max(100_000) }).strict();
export type RunInput = z.infer<typeof RunInputSchema>;

/** How a run that is not finished waits: for a human decision, or paused between turns. */
export const RunWaitingSchema = z.enum(['awaiting_approval', 'paused']);
export type RunWaiting = z.infer<typeof RunWaitingSchema>;

/**
 * A planner's announcement on `daemons.watch` that a daemon wants `paths` watched: workers with a workspace watch
 * them until `ttl_ms` passes without a new announcement, or at once stop on `ttl_ms: 0` (the daemon ended).
 */
export const DaemonWatchSchema = z
  .object({
    run_id: z.string().min(1).max(256),
    paths: z.array(WatchGlobSchema).max(32),
    ttl_ms: z.number().int().min(0).max(3_600_000),
  })
  .strict();
export type DaemonWatch = z.infer<typeof DaemonWatchSchema>;
