import { createHash, randomBytes } from 'node:crypto';
import { AgentMeshError, ErrorCode, retry, type RunEventOf, type RunRequestInput } from '@agentmesh/protocol';
import { followRun, submitRun } from '../infra/run-client.js';
import type { RunResult } from '../model/result.js';
import type { RunContext } from '../run/context.js';
import { cancelRun } from '../infra/run-admin.js';
import type { ChildRecord } from '../model/snapshot.js';
import { readRunRecord } from '../infra/transcripts.js';
import type { ChildArgs } from './agent-tools.js';
import {
  assertMayScriptChild,
  assertMayStartChild,
  childApprovals,
  childLimits,
  childTools,
  type RemainingBudget,
} from './child-rules.js';

/**
 * What one run holds of its children in this process, made with the run's agent tools (a resumed run re-creates it
 * from its snapshot): a follower per child, and the child-id salt once it is checkpointed.
 */
export interface ChildRuns {
  followers?: Map<string, Promise<RunResult>>;
  salt?: Promise<string | undefined>;
}

/**
 * A child's run id: derived from the parent's run id, the turn, the call id and the parent's secret salt (128 random
 * bits kept in its snapshot). A parent resumed on another planner derives the same id, re-submits it (dropped as a
 * duplicate) and re-attaches to the child instead of starting it twice; no one without the salt can predict it.
 * Without `salt` the id is the unsalted one of earlier versions.
 */
export function childRunId(parentId: string, iteration: number, callId: string, salt?: string): string {
  const material =
    salt === undefined ? `${parentId}:${iteration}:${callId}` : `${salt}:${parentId}:${iteration}:${callId}`;
  const hash = createHash('sha256').update(material).digest('hex');
  return salt === undefined
    ? `${parentId.slice(0, 100)}-c${hash.slice(0, 16)}`
    : `${parentId.slice(0, 94)}-c${hash.slice(0, 32)}`;
}

/**
 * The run's child-id salt: made on the first child and checkpointed before any child is submitted with it, so a
 * resumed run derives the same child ids. A snapshot of an earlier version that has children but no salt keeps the
 * unsalted ids, so its running children are re-attached rather than started twice.
 */
function childSalt(ctx: RunContext, runs: ChildRuns): Promise<string | undefined> {
  let salt = runs.salt;
  if (salt === undefined) {
    const { state } = ctx;
    salt =
      state.child_salt !== undefined || (state.children?.length ?? 0) > 0
        ? Promise.resolve(state.child_salt)
        : (async () => {
            const made = randomBytes(16).toString('hex');
            state.child_salt = made;
            await ctx.checkpoint();
            return made;
          })();
    runs.salt = salt;
  }
  return salt;
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
    iterations: limits.max_iterations,
    tool_concurrency: limits.tool_concurrency,
    output_bytes: limits.max_output_bytes,
    nudges: limits.max_nudges,
  };
}

/**
 * The RunRequest of a child: the parent's model, identity, guardrails and approvals (plus any the child adds), narrowed tools,
 * capped limits, the parent link. `script` only when the parent is scripted itself.
 */
function childRequest(ctx: RunContext, id: string, callId: string, args: ChildArgs): RunRequestInput {
  const { request } = ctx;
  assertMayScriptChild(ctx.state.provider.kind, args.script);
  const tools = childTools(request.tools, args.tools);
  const approvals = childApprovals(request.approvals, args.approvals?.require);
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
    ...(approvals === undefined ? {} : { approvals }),
    ...(request.guardrails === undefined ? {} : { guardrails: request.guardrails }),
    ...(args.script === undefined ? {} : { script: args.script }),
    parent: { run_id: ctx.state.run_id, call_id: callId, depth: (request.parent?.depth ?? 0) + 1 },
  };
}

/**
 * Starts (or, after a resume, re-attaches to) the child of one agent.run / agent.spawn call: checks depth, fan-out,
 * tools, limits and script, records it in the snapshot, follows its events and submits it to any planner of the
 * fleet. `agent.started` (which names the child id) is emitted only once the request is submitted.
 */
export async function startChild(
  ctx: RunContext,
  runs: ChildRuns,
  callId: string,
  args: ChildArgs,
): Promise<string> {
  const { state, request, env } = ctx;
  const children = (state.children ??= []);
  const iteration = state.iteration;
  const id = childRunId(state.run_id, iteration, callId, await childSalt(ctx, runs));
  const known = children.find((c) => c.run_id === id);
  if (known === undefined)
    assertMayStartChild(
      { depth: request.parent?.depth ?? 0, childrenStarted: children.length },
      env.subagents,
    );
  const body = childRequest(ctx, id, callId, args);
  if (known === undefined)
    children.push({ run_id: id, call_id: callId, task: args.task, status: 'running', started_at: now() });
  let submitted!: (ok: boolean) => void;
  void follow(ctx, runs, id, new Promise<boolean>((resolve) => (submitted = resolve))).catch(() => undefined);
  try {
    await submitRun(env.bus, body, { prefix: env.prefix });
  } catch (error) {
    submitted(false);
    // never submitted: it does not count as a child, and its follower is not waited on
    if (known === undefined)
      children.splice(
        children.findIndex((c) => c.run_id === id),
        1,
      );
    ctx.sink.emit({ type: 'agent.started', call_id: callId, child_run_id: id });
    ctx.sink.emit({ type: 'agent.completed', call_id: callId, child_run_id: id, status: 'failed' });
    throw error;
  }
  ctx.sink.emit({ type: 'agent.started', call_id: callId, child_run_id: id });
  submitted(true);
  return id;
}

/**
 * The final event of a child, followed once per run and process. It is read only when the child's run record names
 * this run as its parent: a run that took the child's id first is refused with `permission_denied`. `started`
 * (from startChild) holds the settling back until the child is submitted and `agent.started` emitted.
 */
export function follow(
  ctx: RunContext,
  runs: ChildRuns,
  id: string,
  started?: Promise<boolean>,
): Promise<RunResult> {
  let followers = runs.followers;
  if (followers === undefined) {
    followers = runs.followers = new Map();
    ctx.signal.addEventListener('abort', () => cancelChildren(ctx), { once: true });
  }
  let pending = followers.get(id);
  if (pending === undefined) {
    const events = followRun(ctx.env.bus, id, { prefix: ctx.env.prefix, signal: ctx.signal });
    pending = events.then(async (final) => {
      if (started !== undefined && !(await started))
        throw new AgentMeshError(ErrorCode.Unavailable, `child run ${id} was never submitted`);
      try {
        await assertChildOf(ctx, id);
      } catch (error) {
        settle(ctx, id, undefined);
        throw error;
      }
      settle(ctx, id, final);
      return final;
    });
    followers.set(id, pending);
  }
  return pending;
}

/** Refuses a run whose record does not name this run as its parent (`permission_denied`, naming both runs). */
async function assertChildOf(ctx: RunContext, id: string): Promise<void> {
  const parentId = ctx.state.run_id;
  const record = await retry(() => readRunRecord(ctx.env.bus, id, { prefix: ctx.env.prefix }), {
    timeoutMs: 10_000,
    retryable: () => true,
    signal: ctx.signal,
  });
  const recorded = record?.parent?.run_id;
  if (recorded === parentId) return;
  const names =
    record === null
      ? 'has no run record'
      : recorded === undefined
        ? 'names no parent'
        : `names parent ${recorded}`;
  throw new AgentMeshError(
    ErrorCode.PermissionDenied,
    `run ${id} is not a child of run ${parentId}: its run record ${names}; its answer is not read`,
    {
      retryable: false,
      details: { child_run_id: id, parent_run_id: parentId, recorded_parent: recorded ?? null },
    },
  );
}

/**
 * A child ended: its record, the agent.completed event, and its usage and tool calls added to the parent's. Without
 * a final event (a refused child) it ends `failed` and adds nothing.
 */
function settle(ctx: RunContext, id: string, final: RunResult | undefined): void {
  const { state } = ctx;
  const record = state.children?.find((c) => c.run_id === id);
  if (record === undefined || record.status !== 'running') return;
  const status = final?.type === 'run.completed' ? final.status : 'failed';
  record.status = status;
  record.ended_at = now();
  ctx.sink.emit({ type: 'agent.completed', call_id: record.call_id, child_run_id: id, status });
  if (final?.type !== 'run.completed') return;
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
    void cancelRun(env.bus, child.run_id, {
      prefix: env.prefix,
      reason: `parent: ${why}`,
      publishFirst: true,
    }).catch(() => undefined);
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

/** A summary of one child for agent.wait: status and answer, `running`, or `failed` when it could not be read. */
export function childSummary(
  id: string,
  final: RunResult | Error | undefined,
): { run_id: string; status: string; text?: string; output?: unknown; error?: string } {
  if (final === undefined) return { run_id: id, status: 'running' };
  if (final instanceof Error) return { run_id: id, status: 'failed', error: final.message };
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
