import {
  AgentMeshError,
  ApprovalDecisionSchema,
  runControlSubjects,
  requestJson,
  serve,
  type ApprovalDecision,
  type Bus,
  type KvStore,
  type Logger,
  type Subscription,
} from '@agentmesh/protocol';
import { z } from 'zod';
import { parseRecord } from '../model/record.js';
import type { ApprovalStore } from './approval-store.js';

/** The reply to a decision that was recorded. */
export interface ApprovalReply {
  ok: true;
}

/**
 * Answers `runs.<run_id>.approve` in a queue group shared by every planner: any live planner records the decision
 * in the approvals bucket (the planner holding the run sees it through its watch, or applies it when it resumes the
 * run). Errors: `invalid_message` (malformed payload), `not_found`, `already_decided`, `run_finished`.
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
      await assertRunNotFinished(deps.records, runId);
      const record = await deps.store.decide(runId, decision);
      deps.logger.info(
        { run_id: runId, approval_id: record.approval_id, decision: record.decision, by: record.by },
        'approval decision recorded',
      );
      return { ok: true };
    },
  });
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

const ReplySchema = z.object({ ok: z.literal(true) });

/**
 * Sends a decision on `runs.<run_id>.approve` (any live planner answers). Rejects with the named error:
 * `not_found`, `already_decided`, `run_finished`, `invalid_message`, or `no_responders` when no planner runs.
 */
export async function sendApprovalDecision(
  bus: Bus,
  runId: string,
  decision: ApprovalDecision,
  options: { prefix?: string; timeoutMs?: number; signal?: AbortSignal } = {},
): Promise<ApprovalReply> {
  await requestJson(bus, runControlSubjects(options.prefix).approve(runId), decision, ReplySchema, {
    timeoutMs: options.timeoutMs ?? 10_000,
    what: 'approval reply',
    ...(options.signal === undefined ? {} : { signal: options.signal }),
  });
  return { ok: true };
}
