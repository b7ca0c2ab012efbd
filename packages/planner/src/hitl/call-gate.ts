import { AgentMeshError, ErrorCode, isTransientFailure, retry } from '@agentmesh/protocol';
import { approvalReason, approvalSummary, redactSecretArgs } from '../approval-policy.js';
import type { ApprovalRecord } from './approval-store.js';
import type { RunContext } from '../run/context.js';
import type { GateCall } from '../run/ports.js';
import { toolFailed } from '../run/events.js';
import type { ApprovalPolicy } from '../approval-policy.js';
import type { ApprovalStore } from './approval-store.js';
import type { RunControlStore } from './run-controls.js';
import type { WaitingState } from './waiting.js';

/** What a run needs to let calls wait for a human: the store, its policy and its waiting state. */
export interface HitlParts {
  store: ApprovalStore;
  policy: ApprovalPolicy;
  waits: WaitingState;
  /** Input and pause requests (undefined: the run takes none). */
  controls?: RunControlStore | undefined;
}

/** The error code of a call a human (or the approval timeout) denied. */
export const APPROVAL_DENIED = 'approval_denied';

/**
 * Holds a call that needs approval until a human decides: records the approval durably, emits
 * `approval.requested` once, waits (ending as denied with reason `timeout` when the policy says so) and emits
 * `approval.decided`. Returns undefined when the call may run, else the error result the model gets.
 */
export async function gateCall(
  ctx: RunContext,
  hitl: HitlParts,
  p: GateCall,
): Promise<{ content: string; isError: true; succeeded: false } | undefined> {
  const spec = ctx.exposure.spec(p.name);
  if (approvalReason(p.name, spec?.safety, hitl.policy) === undefined) return undefined;
  const runId = ctx.state.run_id;
  const args = redactSecretArgs(p.args, spec?.input_schema);
  const timeoutMs = hitl.policy.timeoutMs;
  const record = await durably(ctx, () =>
    hitl.store.request({
      run_id: runId,
      call_id: p.call.id,
      name: p.name,
      args,
      summary: approvalSummary(p.name, args),
      tenant: ctx.identity.tenant,
      ...(timeoutMs > 0 ? { expires_at: new Date(Date.now() + timeoutMs).toISOString() } : {}),
    }),
  );
  const seen = (type: string) =>
    ctx.sink.events.some(
      (e) => e.type === type && (e as { approval_id?: string }).approval_id === record.approval_id,
    );
  if (!seen('approval.requested'))
    ctx.sink.emit({
      type: 'approval.requested',
      approval_id: record.approval_id,
      call_id: p.call.id,
      name: p.name,
      args,
      summary: record.summary,
    });
  const decided = record.state === 'pending' ? await waitForDecision(ctx, hitl, record) : record;
  if (!seen('approval.decided'))
    ctx.sink.emit({
      type: 'approval.decided',
      approval_id: decided.approval_id,
      decision: decided.decision ?? (decided.state === 'approved' ? 'approve' : 'deny'),
      by: decided.by ?? 'unknown',
      ...(decided.reason === undefined ? {} : { reason: decided.reason }),
    });
  ctx.log.info(
    { call_id: p.call.id, approval_id: decided.approval_id, state: decided.state, by: decided.by },
    'approval decided',
  );
  if (decided.state === 'approved') return undefined;
  const error = new AgentMeshError(
    APPROVAL_DENIED,
    `the call to ${p.name} was denied by ${decided.by ?? 'unknown'}` +
      (decided.reason === undefined || decided.reason === '' ? '' : `: ${decided.reason}`) +
      '. It was not executed.',
    { retryable: false },
  );
  ctx.sink.emit(
    toolFailed({ call_id: p.call.id, name: p.name, worker_id: ctx.env.plannerId, elapsed_ms: 0 }, error),
  );
  return { content: `error (${error.code}): ${error.message}`, isError: true, succeeded: false };
}

async function waitForDecision(
  ctx: RunContext,
  hitl: HitlParts,
  record: ApprovalRecord,
): Promise<ApprovalRecord> {
  const runId = ctx.state.run_id;
  await hitl.waits.enterApproval();
  const stop = new AbortController();
  const onAbort = () => stop.abort();
  ctx.signal.addEventListener('abort', onAbort, { once: true });
  let timer: NodeJS.Timeout | undefined;
  if (record.expires_at !== undefined) {
    const delay = Math.max(0, Date.parse(record.expires_at) - Date.now());
    timer = setTimeout(() => {
      hitl.store.expire(runId, record.approval_id).catch((error: unknown) => {
        ctx.log.warn(
          { err: (error as Error).message, approval_id: record.approval_id },
          'approval expiry failed',
        );
      });
    }, delay);
  }
  try {
    return await durably(ctx, () => hitl.store.waitForDecision(runId, record.approval_id, stop.signal));
  } catch (error) {
    if (ctx.signal.aborted) throw AgentMeshError.from(ctx.signal.reason ?? error);
    throw new AgentMeshError(ErrorCode.Internal, 'waiting for an approval failed', { cause: error });
  } finally {
    if (timer !== undefined) clearTimeout(timer);
    ctx.signal.removeEventListener('abort', onAbort);
    await hitl.waits.leaveApproval();
  }
}

/** An approvals-bucket operation that rides out a restarting server (up to a minute), unless the run stops. */
function durably<T>(ctx: RunContext, work: () => Promise<T>): Promise<T> {
  return retry(work, {
    timeoutMs: 60_000,
    baseMs: 100,
    capMs: 2_000,
    signal: ctx.signal,
    retryable: (e) => !ctx.signal.aborted && isTransientFailure(e),
  });
}
