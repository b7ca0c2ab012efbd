/** What a client sends about a run: the request, triggers, cancels, decisions, input. */
import { z } from 'zod';
import {
  IdentitySchema,
  NonEmptyToolPatternListSchema,
  ProviderKindSchema,
  RunIdSchema,
  PartialRunLimitsSchema,
  ToolPatternListSchema,
  ToolSearchStrategySchema,
} from './common.js';
import { OutputSchemaSchema } from '../output-schema.js';
import { RunPrioritySchema } from './tenants.js';

export { ScriptedTurnSchema, deltasMakeText, type ScriptedTurn } from './scripted.js';
import { ScriptedTurnSchema } from './scripted.js';
import { GuardrailsSchema } from './guardrails.js';

/** Per-run approval policy: adds requirements to the configured `approvals:` (never removes them). */
export const RunApprovalsSchema = z
  .object({
    require: NonEmptyToolPatternListSchema.optional(),
    auto_approve: NonEmptyToolPatternListSchema.optional(),
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

/** The longest `daemon.watch_paths` glob. */
export const WATCH_PATH_MAX_LENGTH = 512;
/** The most `daemon.watch_paths` globs one daemon may watch. */
export const WATCH_PATHS_MAX = 32;

/** A `watch_paths` glob: relative to the workspace root, never absolute, never through `..`. */
export const WatchGlobSchema = z
  .string()
  .min(1)
  .max(WATCH_PATH_MAX_LENGTH, `a watch path must be at most ${WATCH_PATH_MAX_LENGTH} characters`)
  .refine(
    (g) => !g.startsWith('/') && !g.includes('\\'),
    'a watch path is relative to the workspace root (no leading "/" or "\\")',
  )
  .refine((g) => !g.split('/').includes('..'), 'a watch path may not leave the workspace ("..")');

/**
 * Where a forked run starts: after event `seq` of run `run_id` (same tenant). The fork's conversation is the
 * original's up to that event; see docs/forks.md for where forking is allowed.
 */
export const ForkRefSchema = z
  .object({
    run_id: RunIdSchema,
    seq: z.number().int().min(1, 'fork.seq must be an event seq (1 or more)'),
  })
  .strict();
export type ForkRef = z.infer<typeof ForkRefSchema>;

export const RunRequestSchema = z
  .object({
    id: RunIdSchema.optional(),
    task: z.string().trim().min(1, 'task must be a non-empty string'),
    system: z.string().optional(),
    provider: ProviderKindSchema.optional(),
    model: z.string().min(1).optional(),
    base_url: z.string().url().optional(),
    tools: NonEmptyToolPatternListSchema.optional(),
    tool_search: ToolSearchStrategySchema.optional(),
    deferred: NonEmptyToolPatternListSchema.optional(),
    always: NonEmptyToolPatternListSchema.optional(),
    limits: PartialRunLimitsSchema.optional(),
    identity: IdentitySchema.optional(),
    /** Order among the tenant's waiting runs: 1 starts first, 5 last (default 3). */
    priority: RunPrioritySchema.optional(),
    require_successful_tools: ToolPatternListSchema.optional(),
    stop_after_successful_tools: ToolPatternListSchema.optional(),
    tool_retries: z.number().int().min(0).max(10).optional(),
    script: z.array(ScriptedTurnSchema).optional(),
    metadata: z.record(z.string(), z.unknown()).optional(),
    /** How tools reach the model: `native` tool calls, or `text` (rendered into the prompt, fenced ```tool_call blocks). */
    tool_protocol: z.enum(['native', 'text']).optional(),
    /** Which calls of this run wait for a human decision (adds to the configured policy). */
    approvals: RunApprovalsSchema.optional(),
    /** Guardrail rules of this run: added to the configured ones, never replacing or weakening them. */
    guardrails: GuardrailsSchema.optional(),
    /** Continue this conversation (per tenant); `identity.session` is an alias. */
    session: SessionIdSchema.optional(),
    /** A JSON Schema the final answer must satisfy (within the limits of output-schema.ts); run.completed.output holds the validated value. */
    output_schema: OutputSchemaSchema.optional(),
    /** Set on a child run started by agent.run / agent.spawn; depth is the child's nesting level (1 = child of a top-level run). */
    parent: z
      .object({
        run_id: z.string().min(1),
        call_id: z.string().min(1),
        depth: z.number().int().min(1).optional(),
      })
      .strict()
      .optional(),
    /** Start from the state of another run after one of its events, instead of from the task alone. */
    fork: ForkRefSchema.optional(),
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
        watch_paths: z
          .array(WatchGlobSchema)
          .min(1)
          .max(WATCH_PATHS_MAX, `a daemon watches at most ${WATCH_PATHS_MAX} paths`)
          .optional(),
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

/**
 * A client's id for one control request (approve, deny, input, pause, resume, trigger, cancel). Optional: a repeat
 * carrying the same id is answered with the first outcome and `duplicate: true` instead of being applied again, so a
 * client may send again after a timeout or `no_responders`. Without it a request behaves as before.
 */
export const RequestIdSchema = z.string().min(1).max(128);

/** The reply to a control request that was recorded; `duplicate` when an earlier one with its `request_id` was. */
export const ControlReplySchema = z.object({ ok: z.literal(true), duplicate: z.boolean().optional() });
export type ControlReply = z.infer<typeof ControlReplySchema>;

/** The body of `runs.<run_id>.pause` and `runs.<run_id>.resume` (may be empty). */
export const RunControlRequestSchema = z.object({ request_id: RequestIdSchema.optional() }).strict();
export type RunControlRequest = z.infer<typeof RunControlRequestSchema>;

/** A trigger for a daemon run (`runs.<run_id>.trigger`): a kind and any payload. */
export const TriggerSchema = z
  .object({
    kind: z.string().trim().min(1, 'kind must be a non-empty string').max(128),
    request_id: RequestIdSchema.optional(),
  })
  .catchall(z.unknown());
export type Trigger = z.infer<typeof TriggerSchema>;

export const CancelRequestSchema = z
  .object({ reason: z.string().optional(), request_id: RequestIdSchema.optional() })
  .strict();
export type CancelRequest = z.infer<typeof CancelRequestSchema>;

/** A human's decision on `runs.<run_id>.approve`; the reply is `{ ok: true }` or `not_found` / `already_decided`. */
export const ApprovalDecisionSchema = z
  .object({
    approval_id: z.string().min(1).max(128),
    decision: z.enum(['approve', 'deny']),
    reason: z.string().max(4_096).optional(),
    by: z.string().max(256).optional(),
    request_id: RequestIdSchema.optional(),
  })
  .strict();
export type ApprovalDecision = z.infer<typeof ApprovalDecisionSchema>;

/** A user message added to a running run (`runs.<run_id>.input`), applied before its next model turn. */
export const RunInputSchema = z
  .object({ text: z.string().min(1).max(100_000), request_id: RequestIdSchema.optional() })
  .strict();
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
    paths: z.array(WatchGlobSchema).max(WATCH_PATHS_MAX),
    ttl_ms: z.number().int().min(0).max(3_600_000),
  })
  .strict();
export type DaemonWatch = z.infer<typeof DaemonWatchSchema>;
