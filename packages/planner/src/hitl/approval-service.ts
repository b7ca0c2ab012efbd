import {
  AgentMeshError,
  ApprovalDecisionSchema,
  ControlReplySchema,
  newRequestId,
  requestControl,
  runControlSubjects,
  serve,
  type ApprovalDecision,
  type Bus,
  type KvStore,
  type Logger,
  type Subscription,
  runControlSubject,
  type ControlSendOptions,
} from '@agentmesh/protocol';
import { parseRecord } from '../model/record.js';
import type { ApprovalStore } from './approval-store.js';

/** The reply to a decision that was recorded; `duplicate` when it repeats (same `request_id`) the one recorded. */
export interface ApprovalReply {
  ok: true;
  duplicate?: boolean;
}

/** What {@link sendApprovalDecision} did: the reply, the request id it sent and how many attempts it took. */
export interface ApprovalSendResult extends ApprovalReply {
  request_id: string;
  attempts: number;
}

/**
 * Answers `runs.<run_id>.approve` in a queue group shared by every planner: any live planner records the decision
 * in the approvals bucket (the planner holding the run sees it through its watch, or applies it when it resumes the
 * run). A repeat of the decision that was recorded (same `request_id`) is answered `{ ok: true, duplicate: true }`.
 * Errors: `invalid_message` (malformed payload), `not_found`, `already_decided` (naming the decision recorded and
 * who made it), `run_finished`.
 */
export function serveApprovals(deps: {
  bus: Bus;
  prefix: string;
  store: ApprovalStore;
  records: KvStore;
  logger: Logger;
}): Subscription {
  const subjects = runControlSubjects(deps.prefix);
  const head = `${deps.prefix}.runs.`;
  return serve({
    bus: deps.bus,
    subject: subjects.allApprovals,
    schema: ApprovalDecisionSchema,
    what: 'approval decision',
    logger: deps.logger,
    queue: 'agentmesh-planners',
    handler: async (decision, msg): Promise<ApprovalReply> => {
      const runId = msg.subject.slice(head.length, -'.approve'.length);
      if (await deps.store.isRepeat(runId, decision)) return duplicate(deps.logger, runId, decision);
      await assertRunNotFinished(deps.records, runId);
      const record = await deps.store.decide(runId, decision);
      if (record.duplicate === true) return duplicate(deps.logger, runId, decision);
      deps.logger.info(
        { run_id: runId, approval_id: record.approval_id, decision: record.decision, by: record.by },
        'approval decision recorded',
      );
      return { ok: true };
    },
  });
}

function duplicate(logger: Logger, runId: string, decision: ApprovalDecision): ApprovalReply {
  logger.info(
    { run_id: runId, approval_id: decision.approval_id, request_id: decision.request_id },
    'approval decision repeated: answered with the recorded outcome',
  );
  return { ok: true, duplicate: true };
}

async function assertRunNotFinished(records: KvStore, runId: string): Promise<void> {
  const entry = await records.get(runId);
  if (entry === null) return;
  const record = parseRecord(entry.value);
  if (record.state === 'finished')
    throw new AgentMeshError(
      'run_finished',
      `run "${runId}" already finished (${record.status ?? 'finished'}): there is nothing to decide`,
      { retryable: false, details: { run_id: runId, status: record.status } },
    );
}

/**
 * Sends a decision on `runs.<run_id>.approve` (any live planner answers) with a `request_id` (generated when the
 * decision has none), and sends it again on `timeout` or `no_responders` within the deadline (`timeoutMs`, default
 * 10 s): a repeat that lands after the first did is answered `duplicate: true`. Rejects with the named error:
 * `not_found`, `already_decided`, `run_finished`, `invalid_message`, or `no_responders` when no planner runs.
 */
export async function sendApprovalDecision(
  bus: Bus,
  runId: string,
  decision: ApprovalDecision,
  options: ControlSendOptions = {},
): Promise<ApprovalSendResult> {
  const body = { ...decision, request_id: decision.request_id ?? newRequestId() };
  const { reply, attempts } = await requestControl(
    bus,
    runControlSubject(runId, 'approve', options),
    body,
    ControlReplySchema,
    { ...options, what: 'approval reply' },
  );
  return {
    ok: true,
    ...(reply.duplicate === true ? { duplicate: true } : {}),
    request_id: body.request_id,
    attempts,
  };
}
