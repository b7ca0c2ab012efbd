import {
  RunLimitsSchema,
  type RunLimits,
  type GuardrailsInput,
  type RunRequest,
  type ToolSearchStrategy,
} from '@agentmesh/protocol';
import type { CapabilityTable } from '../capabilities.js';
import type { ApprovalConfig } from '../approval-policy.js';
import type { SearchMode } from '../exposure.js';
import type { LoopThresholds } from '../loop-detector.js';
import type { ProviderChoice } from '../providers/index.js';
import type { NativeSearchVariant } from '../providers/types.js';
import type { RunSnapshot } from '../model/snapshot.js';
import type { ForkStart } from '../model/fork.js';
import type { Skill, SkillMatchInput } from '../model/skill.js';
import type { ClampedLimit, EffectiveLimits } from '../model/limits.js';

export type { ClampedLimit, EffectiveLimits } from '../model/limits.js';

/** The catalog scope of a run: its allow-list and the loading overrides. */
export interface ToolScope {
  allow?: string[];
  deferred?: string[];
  always?: string[];
}

/** `sessions:` settings: when a session's transcript is compacted. */
export interface SessionDefaults {
  /** Compact a session's transcript once it is estimated above this many tokens (default 100000). */
  max_tokens?: number;
}

export const DEFAULT_SESSION_MAX_TOKENS = 100_000;

/** `subagents:` in the configuration. */
export interface SubagentConfig {
  enabled?: boolean;
  /** How deep runs may nest: a top-level run has depth 0, its children 1 (default 2). */
  max_depth?: number;
  /** Children one run may start over its life (default 8). */
  max_children?: number;
}

/**
 * A daemon's lifetime when the planner configures none (`daemon_timeout_ms`): a day. It is also the most a daemon
 * may ask for in its `limits.timeout_ms`.
 */
export const DAEMON_TIMEOUT_MS = 86_400_000;

/** Tool search settings (`tools.search` in agentmesh.yaml). */
export interface ToolSearchDefaults {
  strategy?: ToolSearchStrategy;
  /** auto: native provider search where the capability table allows it, client-side otherwise. */
  mode?: 'auto' | 'native' | 'client';
  /** Results per search (default 10, at most 50). */
  limit?: number;
  /** Soft cap on the token footprint of promoted tools (chars / 4); the oldest promoted are evicted first. */
  budget_tokens?: number;
  /** List deferred tools by name in the system prompt. */
  include_stub_listing?: boolean;
}

/** What a request's `system` may do to the configured system prompt. */
export type SystemPromptOverride = 'replace' | 'append' | 'refuse';

/** What applies to runs that do not say otherwise. */
export interface PlannerDefaults {
  /** The limits of every run: its defaults and its ceilings (a request may lower each, never raise one). */
  limits?: Partial<RunLimits>;
  /** How long a daemon run lives at most, and by default (default {@link DAEMON_TIMEOUT_MS}). */
  daemon_timeout_ms?: number;
  tool_search?: ToolSearchStrategy | ToolSearchDefaults;
  system?: string;
  /** Names or globs deferred for every run (a run's own list adds to these). */
  deferred?: string[];
  /** Names or globs always loaded for every run (wins over deferred). */
  always?: string[];
  /** The message sent after a turn with neither a tool call nor an answer. */
  nudge?: string;
  loop_detect?: Partial<LoopThresholds>;
  /** Which calls wait for a human decision (`approvals:` in agentmesh.yaml); a run request can add to it. */
  approvals?: ApprovalConfig;
  /**
   * What a request's `system` does to the configured `system`: `append` (default: the configured prompt stays
   * first, the request's follows it), `replace` it, or `refuse` the run (`permission_denied`). Without a configured
   * prompt the request's is used under `append` and `replace`.
   */
  system_prompt_override?: SystemPromptOverride;
  /** `sessions:` in agentmesh.yaml: when a session's transcript is compacted. */
  sessions?: SessionDefaults;
  /** Child runs (agent.* tools): offered to every run when enabled, depth and fan-out limits. */
  subagents?: SubagentConfig;
  /** Skills every run may activate (validated: see `collectSkills`). */
  skills?: Skill[];
  /** How skills are matched each turn (default metadata, top_n 1, sticky). */
  skill_match?: SkillMatchInput;
  /** `guardrails:` in agentmesh.yaml (validated by GuardrailsSchema); a run request can only add rules. */
  guardrails?: GuardrailsInput;
}

/** The configured limits (schema defaults filled in), parsed once per planner defaults. */
const configuredLimits = new WeakMap<PlannerDefaults, RunLimits>();

const LIMIT_FIELDS = Object.keys(RunLimitsSchema.shape) as (keyof RunLimits)[];

function ceilings(defaults: PlannerDefaults, daemon: boolean): RunLimits {
  let limits = configuredLimits.get(defaults);
  if (limits === undefined) {
    limits = RunLimitsSchema.parse({ ...defaults.limits });
    configuredLimits.set(defaults, limits);
  }
  return daemon ? { ...limits, timeout_ms: defaults.daemon_timeout_ms ?? DAEMON_TIMEOUT_MS } : limits;
}

/**
 * A run's limits: the planner's configured limits are its defaults and its ceilings. A request may lower any of
 * them, never raise one: a higher value is held at the ceiling (and reported in `clamped`), and a limit the
 * planner sets (`max_cost_usd`, `max_tokens`) cannot be dropped. A daemon's timeout is `daemon_timeout_ms`.
 */
export function effectiveLimits(defaults: PlannerDefaults, request: RunRequest): EffectiveLimits {
  const limits: RunLimits = { ...ceilings(defaults, request.daemon !== undefined) };
  const clamped: ClampedLimit[] = [];
  const asked = request.limits;
  if (asked === undefined) return { limits, clamped };
  // the schema's order, not the request's: the same request reports the same `clamped` whichever check parsed it
  for (const field of LIMIT_FIELDS) {
    const requested = asked[field];
    if (requested === undefined) continue;
    const ceiling = limits[field];
    if (ceiling === undefined || requested <= ceiling) limits[field] = requested;
    else clamped.push({ field, requested, ceiling });
  }
  return { limits, clamped };
}

export function searchDefaults(defaults: PlannerDefaults): ToolSearchDefaults {
  const d = defaults.tool_search;
  return typeof d === 'string' ? { strategy: d } : (d ?? {});
}

export function toolScope(defaults: PlannerDefaults, request: RunRequest): ToolScope {
  const deferred = [...(defaults.deferred ?? []), ...(request.deferred ?? [])];
  const always = [...(defaults.always ?? []), ...(request.always ?? [])];
  return {
    ...(request.tools ? { allow: request.tools } : {}),
    ...(deferred.length > 0 ? { deferred } : {}),
    ...(always.length > 0 ? { always } : {}),
  };
}

export interface SnapshotSource {
  request: RunRequest;
  runId: string;
  plannerId: string;
  choice: ProviderChoice;
  startedAt: string;
  /** A fork starts from the original run's conversation and tool state instead of the task alone. */
  fork?: ForkStart | undefined;
}

/**
 * The snapshot a new run starts from: nothing done yet, the task as the first message; a fork's conversation is the
 * original's up to the fork point (its counters start at zero, as a session's next run does).
 */
export function initialSnapshot(
  source: SnapshotSource,
  defaults: PlannerDefaults,
  capabilities: CapabilityTable,
): RunSnapshot {
  const { request, choice, fork } = source;
  const search = searchDefaults(defaults);
  const strategy = request.tool_search ?? search.strategy ?? 'bm25';
  const caps = capabilities.resolve(choice.kind, choice.model);
  let mode: SearchMode = strategy === 'off' ? 'off' : 'client';
  let variant: NativeSearchVariant | undefined;
  // a model on the text tool protocol searches client-side: nothing goes on the wire
  const textProtocol = (choice.toolProtocol ?? caps.tool_protocol) === 'text';
  if (strategy !== 'off' && search.mode !== 'client' && caps.tool_search.length > 0 && !textProtocol) {
    if ((strategy === 'bm25' || strategy === 'regex') && caps.tool_search.includes(strategy))
      variant = strategy;
    // a hosted search (OpenAI Responses) is the model's own: it needs no strategy match
    else if (search.mode === 'native' || caps.tool_search[0] === 'hosted') variant = caps.tool_search[0];
    if (variant !== undefined) mode = 'native';
  }
  return {
    version: 1,
    run_id: source.runId,
    planner_id: source.plannerId,
    request,
    provider: { kind: choice.kind, model: choice.model },
    limits: effectiveLimits(defaults, request).limits,
    search: { mode, strategy, native_variant: variant, budget_tokens: search.budget_tokens },
    system: '',
    iteration: 0,
    tool_calls: 0,
    nudges: 0,
    usage: { input_tokens: 0, output_tokens: 0 },
    last_text: '',
    messages: fork ? structuredClone(fork.messages) : [{ role: 'user', content: request.task }],
    exposure: { promoted: [], pending: [], surfaced: [], artifacts: fork?.artifacts ?? false },
    loop: { signature: undefined, count: 0 },
    succeeded: [...(fork?.succeeded ?? [])],
    seq: 0,
    started_at: source.startedAt,
    phase: 'model',
  };
}
