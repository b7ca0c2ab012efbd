import { createHash } from 'node:crypto';
import {
  AgentMeshError,
  ErrorCode,
  encodeJson,
  type RunEventOf,
  type RunRequestInput,
} from '@agentmesh/protocol';
import { followRun, submitRun } from '../client.js';
import type { RunResult } from '../run/executor.js';
import type { RunContext } from '../run/context.js';
import { cancelRun } from '../run-admin.js';
import type { ChildRecord } from '../run-state.js';
import type { ChildArgs } from './agent-tools.js';
import { assertMayStartChild, childLimits, childTools, type RemainingBudget } from './child-rules.js';

/** The followers of the children of each run in this process (a resumed run re-creates them from its snapshot). */
const followers = new WeakMap<RunContext, Map<string, Promise<RunResult>>>();

/**
 * A child's run id: deterministic from the parent's run id, the turn and the call id, so a parent resumed on another
 * planner re-submits the same id (dropped as a duplicate) and re-attaches to the child instead of starting it twice.
 */
export function childRunId(parentId: string, iteration: number, callId: string): string {
  const hash = createHash('sha256').update(`${parentId}:${iteration}:${callId}`).digest('hex').slice(0, 16);
  return `${parentId.slice(0, 100)}-c${hash}`;
}

function remainingBudget(ctx: RunContext): RemainingBudget {
  const { limits, state } = ctx;
  const used = state.usage.input_tokens + state.usage.output_tokens;
  return {
    tool_calls: Math.max(0, limits.max_tool_calls - state.tool_calls),
    ...(limits.max_tokens === undefined ? {} : { tokens: Math.max(1, limits.max_tokens - used) }),
    ...(limits.max_cost_usd === undefined
      ? {}
      : { cost_usd: Math.max(0, limits.max_cost_usd - (state.usage.cost_usd ?? 0)) }),
    time_ms: Math.max(1, limits.timeout_ms - (Date.now() - Date.parse(state.started_at))),
  };
}

/** The RunRequest of a child: the parent's model and identity, narrowed tools, capped limits, the parent link. */
function childRequest(ctx: RunContext, id: string, callId: string, args: ChildArgs): RunRequestInput {
  const { request } = ctx;
  const tools = childTools(request.tools, args.tools);
  return {
    id,
    task: args.task,
    ...(args.system === undefined ? {} : { system: args.system }),
    ...(request.provider === undefined ? {} : { provider: request.provider }),
    ...(request.model === undefined ? {} : { model: request.model }),
    ...(request.base_url === undefined ? {} : { base_url: request.base_url }),
    ...(request.tool_protocol === undefined ? {} : { tool_protocol: request.tool_protocol }),
    ...(request.tool_search === undefined ? {} : { tool_search: request.tool_search }),
    ...(request.deferred === undefined ? {} : { deferred: request.deferred }),
    ...(request.always === undefined ? {} : { always: request.always }),
    ...(request.identity === undefined ? {} : { identity: request.identity }),
    ...(tools === undefined ? {} : { tools }),
    limits: childLimits(remainingBudget(ctx), args.limits),
    ...(args.output_schema === undefined ? {} : { output_schema: args.output_schema }),
    ...(args.script === undefined ? {} : { script: args.script }),
    parent: { run_id: ctx.state.run_id, call_id: callId, depth: (request.parent?.depth ?? 0) + 1 },
  };
}

/**
 * Starts (or, after a resume, re-attaches to) the child of one agent.run / agent.spawn call: checks depth, fan-out,
 * tools and limits, records it in the snapshot, follows its events and submits it to any planner of the fleet.
 */
export async function startChild(ctx: RunContext, callId: string, args: ChildArgs): Promise<string> {
  const { state, request, env } = ctx;
  const children = (state.children ??= []);
  const id = childRunId(state.run_id, state.iteration, callId);
  const known = children.find((c) => c.run_id === id);
  if (known === undefined)
    assertMayStartChild(
      { depth: request.parent?.depth ?? 0, childrenStarted: children.length },
      env.subagents,
    );
  const body = childRequest(ctx, id, callId, args);
  if (known === undefined)
    children.push({ run_id: id, call_id: callId, task: args.task, status: 'running', started_at: now() });
  ctx.sink.emit({ type: 'agent.started', call_id: callId, child_run_id: id });
  void follow(ctx, id).catch(() => undefined);
  try {
    await submitRun(env.bus, body, { prefix: env.prefix });
  } catch (error) {
    // never submitted: it does not count as a child, and its follower is not waited on
    if (known === undefined)
      children.splice(
        children.findIndex((c) => c.run_id === id),
        1,
      );
    ctx.sink.emit({ type: 'agent.completed', call_id: callId, child_run_id: id, status: 'failed' });
    throw error;
  }
  return id;
}

/** The final event of a child, followed once per run and process. */
export function follow(ctx: RunContext, id: string): Promise<RunResult> {
  let runs = followers.get(ctx);
  if (runs === undefined) {
    runs = new Map();
    followers.set(ctx, runs);
    ctx.signal.addEventListener('abort', () => cancelChildren(ctx), { once: true });
  }
  let pending = runs.get(id);
  if (pending === undefined) {
    pending = followRun(ctx.env.bus, id, { prefix: ctx.env.prefix, signal: ctx.signal }).then((final) => {
      settle(ctx, id, final);
      return final;
    });
    runs.set(id, pending);
  }
  return pending;
}

/** A child ended: its record, the agent.completed event, and its usage and tool calls added to the parent's. */
function settle(ctx: RunContext, id: string, final: RunResult): void {
  const { state } = ctx;
  const record = state.children?.find((c) => c.run_id === id);
  if (record === undefined || record.status !== 'running') return;
  const status = final.type === 'run.completed' ? final.status : 'failed';
  record.status = status;
  record.ended_at = now();
  ctx.sink.emit({ type: 'agent.completed', call_id: record.call_id, child_run_id: id, status });
  if (final.type !== 'run.completed') return;
  const u = final.usage;
  state.usage.input_tokens += u.input_tokens;
  state.usage.output_tokens += u.output_tokens;
  if (u.cost_usd !== undefined) state.usage.cost_usd = (state.usage.cost_usd ?? 0) + u.cost_usd;
  state.tool_calls += final.tool_calls;
  (state.usage.children ??= []).push({
    run_id: id,
    call_id: record.call_id,
    status,
    input_tokens: u.input_tokens,
    output_tokens: u.output_tokens,
    ...(u.cost_usd === undefined ? {} : { cost_usd: u.cost_usd }),
    tool_calls: final.tool_calls,
  });
}

/**
 * Cancels the children still running: when the parent is cancelled or times out, and when it ends while spawned
 * children run. A parent fenced off (now owned by another planner) leaves them alone.
 */
export function cancelChildren(ctx: RunContext, reason = 'parent run ended'): void {
  if (ctx.signal.aborted && ctx.control.stopReason() === undefined) return;
  const { env } = ctx;
  const why = ctx.control.stopReason()?.reason ?? reason;
  for (const child of ctx.state.children ?? []) {
    if (child.status !== 'running') continue;
    env.bus.publish(env.subjects.runCancel(child.run_id), encodeJson({ reason: `parent: ${why}` }));
    void cancelRun(env.bus, child.run_id, { prefix: env.prefix, reason: `parent: ${why}` }).catch(
      () => undefined,
    );
  }
}

/** What a child's final event tells the parent's model: the output (JSON) or text when done, an error otherwise. */
export function childAnswer(id: string, final: RunResult): string {
  if (final.type === 'run.completed' && final.status === 'done')
    return final.output !== undefined ? JSON.stringify(final.output) : final.text;
  const why =
    final.type === 'run.completed'
      ? `${final.status}: ${final.reason ?? ''}`
      : `failed: ${final.error.code}: ${final.error.message}`;
  throw new AgentMeshError('child_failed', `child run ${id} ended ${why}`, {
    retryable: false,
    details: { child_run_id: id, ...(final.type === 'run.completed' ? { text: final.text } : {}) },
  });
}

/** A summary of one child for agent.wait: status and answer, or `running`. */
export function childSummary(
  id: string,
  final: RunResult | undefined,
): { run_id: string; status: string; text?: string; output?: unknown; error?: string } {
  if (final === undefined) return { run_id: id, status: 'running' };
  if (final.type === 'run.failed') return { run_id: id, status: 'failed', error: final.error.message };
  const done = final as RunEventOf<'run.completed'>;
  return {
    run_id: id,
    status: done.status,
    text: done.text,
    ...(done.output === undefined ? {} : { output: done.output }),
  };
}

/** The child record of this run, or `not_found` naming the run's children. */
export function ownChild(ctx: RunContext, id: string): ChildRecord {
  const record = ctx.state.children?.find((c) => c.run_id === id);
  if (record !== undefined) return record;
  const known = (ctx.state.children ?? []).map((c) => c.run_id);
  throw new AgentMeshError(
    ErrorCode.NotFound,
    `${id} is not a child run of this run${known.length > 0 ? `; its children: ${known.join(', ')}` : ''}`,
    { retryable: false },
  );
}

const now = () => new Date().toISOString();
