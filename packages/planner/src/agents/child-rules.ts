import {
  AgentMeshError,
  ErrorCode,
  matchesAnyToolPattern,
  type RunApprovals,
  type RunLimits,
} from '@agentmesh/protocol';
import type { SubagentConfig } from '../run/setup.js';

export type { SubagentConfig } from '../run/setup.js';

export const DEFAULT_MAX_DEPTH = 2;
export const DEFAULT_MAX_CHILDREN = 8;

export const ChildErrorCode = {
  ToolsNotAllowed: 'tools_not_allowed',
  DepthExceeded: 'depth_exceeded',
  TooManyChildren: 'too_many_children',
} as const;

/**
 * The allow-list of a child run: what it asked for, each entry inside the parent's own allow-list (an entry the
 * parent does not cover is refused with `tools_not_allowed`, listing what is allowed). No request means the
 * parent's list. `registered` are the tool names known now, used to check globs by what they select.
 */
export function childTools(
  parentAllow: readonly string[] | undefined,
  requested: readonly string[] | undefined,
  registered: readonly string[] = [],
): string[] | undefined {
  if (requested === undefined) return parentAllow === undefined ? undefined : [...parentAllow];
  if (parentAllow === undefined) return [...requested];
  const refused = requested.filter((entry) => !covered(entry, parentAllow, registered));
  if (refused.length > 0)
    throw new AgentMeshError(
      ChildErrorCode.ToolsNotAllowed,
      `a child run may only use tools its parent may use: ${refused.join(', ')} not allowed; allowed: ${parentAllow.join(', ')}`,
      { retryable: false, details: { refused, allowed: [...parentAllow] } },
    );
  return [...requested];
}

function covered(entry: string, parentAllow: readonly string[], registered: readonly string[]): boolean {
  if (!/[*?]/.test(entry)) return matchesAnyToolPattern(entry, parentAllow);
  const prefix = entry.replace(/[.]?[*?].*$/, '');
  if (prefix !== '' && matchesAnyToolPattern(prefix, parentAllow)) return true;
  const selected = registered.filter((name) => matchesAnyToolPattern(name, [entry]));
  return selected.length > 0 && selected.every((name) => matchesAnyToolPattern(name, parentAllow));
}

/** What is left of a parent's budget when it starts a child, and the parent's own per-run limits. */
export interface RemainingBudget {
  tool_calls: number;
  iterations?: number;
  tokens?: number;
  cost_usd?: number;
  /** Milliseconds until the parent's own timeout. */
  time_ms: number;
  /** The parent's tool_concurrency, max_output_bytes and max_nudges: a child may only lower them. */
  tool_concurrency?: number;
  output_bytes?: number;
  nudges?: number;
}

/**
 * A child's limits: what it asked for, never above what the parent has left (tool calls, tokens, cost, time) nor
 * above the parent's own per-run limits (iterations, tool concurrency, output bytes, nudges). A limit the child
 * does not ask for is the parent's.
 */
export function childLimits(
  remaining: RemainingBudget,
  requested: Partial<RunLimits> = {},
): Partial<RunLimits> {
  const cap = (asked: number | undefined, left: number | undefined): number | undefined =>
    left === undefined ? asked : asked === undefined ? left : Math.min(asked, left);
  const out: Partial<RunLimits> = { ...requested };
  out.max_tool_calls = Math.max(0, cap(requested.max_tool_calls, remaining.tool_calls) ?? 0);
  out.timeout_ms = Math.max(1, Math.floor(cap(requested.timeout_ms, remaining.time_ms) ?? 1));
  const atLeast = (min: number, value: number | undefined) =>
    value === undefined ? undefined : Math.max(min, value);
  const capped: Partial<RunLimits> = {
    max_iterations: atLeast(1, cap(requested.max_iterations, remaining.iterations)),
    tool_concurrency: atLeast(1, cap(requested.tool_concurrency, remaining.tool_concurrency)),
    max_output_bytes: atLeast(256, cap(requested.max_output_bytes, remaining.output_bytes)),
    max_nudges: atLeast(0, cap(requested.max_nudges, remaining.nudges)),
    max_tokens: atLeast(1, cap(requested.max_tokens, remaining.tokens)),
    max_cost_usd: atLeast(0, cap(requested.max_cost_usd, remaining.cost_usd)),
  };
  for (const [key, value] of Object.entries(capped) as [keyof RunLimits, number | undefined][])
    if (value !== undefined) out[key] = value;
  return out;
}

/**
 * A child's approval policy: the parent's, with the child's own `require` entries added. A child never loosens it:
 * it gets the parent's `auto_approve` and `timeout_ms` as they are and can only add requirements.
 */
export function childApprovals(
  parent: RunApprovals | undefined,
  requested: readonly string[] | undefined,
): RunApprovals | undefined {
  const require = [...new Set([...(parent?.require ?? []), ...(requested ?? [])])];
  if (parent === undefined && require.length === 0) return undefined;
  return {
    ...parent,
    ...(require.length === 0 ? {} : { require }),
  };
}

/**
 * Refuses `script` (scripted turns for the child) unless the parent itself runs on the scripted provider: a real
 * model must not make up a child's answers.
 */
export function assertMayScriptChild(parentProvider: string, script: unknown): void {
  if (script === undefined || parentProvider === 'scripted') return;
  throw new AgentMeshError(
    ErrorCode.PermissionDenied,
    `script is refused: only a run on the scripted provider may script its child runs (this run's provider is ${parentProvider})`,
    { retryable: false, details: { field: 'script', provider: parentProvider } },
  );
}

/** Refuses a child that would nest deeper than `max_depth` or exceed `max_children` of its parent. */
export function assertMayStartChild(
  parent: { depth: number; childrenStarted: number },
  config: SubagentConfig = {},
): void {
  const maxDepth = config.max_depth ?? DEFAULT_MAX_DEPTH;
  const maxChildren = config.max_children ?? DEFAULT_MAX_CHILDREN;
  if (parent.depth + 1 > maxDepth)
    throw new AgentMeshError(
      ChildErrorCode.DepthExceeded,
      `a run at depth ${parent.depth} may not start a child: subagents.max_depth is ${maxDepth}`,
      { retryable: false, details: { depth: parent.depth, max_depth: maxDepth } },
    );
  if (parent.childrenStarted >= maxChildren)
    throw new AgentMeshError(
      ChildErrorCode.TooManyChildren,
      `this run already started ${parent.childrenStarted} children: subagents.max_children is ${maxChildren}`,
      { retryable: false, details: { children: parent.childrenStarted, max_children: maxChildren } },
    );
}
