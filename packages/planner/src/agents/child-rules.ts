import { AgentMeshError, matchesAnyToolPattern, type RunLimits } from '@agentmesh/protocol';

/** `subagents:` in the configuration. */
export interface SubagentConfig {
  enabled?: boolean;
  /** How deep runs may nest: a top-level run has depth 0, its children 1 (default 2). */
  max_depth?: number;
  /** Children one run may start over its life (default 8). */
  max_children?: number;
}

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

/** What is left of a parent's budget when it starts a child. */
export interface RemainingBudget {
  tool_calls: number;
  iterations?: number;
  tokens?: number;
  cost_usd?: number;
  /** Milliseconds until the parent's own timeout. */
  time_ms: number;
}

/** A child's limits: what it asked for, never above what the parent has left. */
export function childLimits(
  remaining: RemainingBudget,
  requested: Partial<RunLimits> = {},
): Partial<RunLimits> {
  const cap = (asked: number | undefined, left: number | undefined): number | undefined =>
    left === undefined ? asked : asked === undefined ? left : Math.min(asked, left);
  const out: Partial<RunLimits> = { ...requested };
  out.max_tool_calls = Math.max(0, cap(requested.max_tool_calls, remaining.tool_calls) ?? 0);
  out.timeout_ms = Math.max(1, Math.floor(cap(requested.timeout_ms, remaining.time_ms) ?? 1));
  const iterations = cap(requested.max_iterations, remaining.iterations);
  if (iterations !== undefined) out.max_iterations = Math.max(1, iterations);
  const tokens = cap(requested.max_tokens, remaining.tokens);
  if (tokens !== undefined) out.max_tokens = Math.max(1, tokens);
  const cost = cap(requested.max_cost_usd, remaining.cost_usd);
  if (cost !== undefined) out.max_cost_usd = Math.max(0, cost);
  return out;
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
