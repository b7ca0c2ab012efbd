import { createHash } from 'node:crypto';
import {
  AgentMeshError,
  decodeMessage,
  ErrorCode,
  encodeJson,
  isAgentMeshError,
  type KvEntry,
  type KvStore,
  type ApprovalDecision,
  readEntries,
} from '@agentmesh/protocol';
import { z } from 'zod';
import { assertKnownSchema, SCHEMA_VERSION } from '../model/versions.js';

export { ApprovalDecisionSchema, type ApprovalDecision } from '@agentmesh/protocol';

export type ApprovalState = 'pending' | 'approved' | 'denied';

/** One approval as kept in the approvals bucket, from the request to the decision. */
export interface ApprovalRecord {
  /** The record's format (absent: 1). */
  schema_version?: number | undefined;
  approval_id: string;
  run_id: string;
  call_id: string;
  name: string;
  /** Arguments with secret values redacted. */
  args: unknown;
  summary: string;
  tenant?: string | undefined;
  requested_at: string;
  /** When a pending approval ends as denied with reason `timeout` (absent: never). */
  expires_at?: string | undefined;
  state: ApprovalState;
  decision?: ApprovalDecision['decision'] | undefined;
  by?: string | undefined;
  reason?: string | undefined;
  decided_at?: string | undefined;
  /** The client's `request_id` of the decision, so a repeat of it is answered as a duplicate. */
  request_id?: string | undefined;
}

/** A decision as `decide` returns it: `duplicate` when it repeats the request (same `request_id`) that decided. */
export type DecidedApproval = ApprovalRecord & { duplicate?: true };

export type NewApproval = Omit<ApprovalRecord, 'approval_id' | 'state' | 'requested_at'> & {
  requested_at?: string;
};

/**
 * The approval id of a call: derived from run and call ids, so a planner that resumes a run asks for the same
 * approval again and finds a decision made while nobody held the run.
 */
export function approvalIdFor(runId: string, callId: string): string {
  return `ap_${createHash('sha256').update(`${runId}\0${callId}`).digest('hex').slice(0, 20)}`;
}

const RecordSchema = z.looseObject({
  approval_id: z.string(),
  run_id: z.string(),
  call_id: z.string(),
  name: z.string(),
  state: z.enum(['pending', 'approved', 'denied']),
});

/**
 * Pending and decided approvals in a KV bucket (keys `<run_id>.<approval_id>`). A decision is a compare-and-set
 * from `pending`, so of two racing decisions exactly one wins; the loser gets `already_decided`.
 */
export class ApprovalStore {
  constructor(private readonly kv: KvStore) {}

  /** Records a pending approval, or returns the one already recorded for that call (possibly decided). */
  async request(approval: NewApproval): Promise<ApprovalRecord> {
    const record: ApprovalRecord = {
      schema_version: SCHEMA_VERSION,
      ...approval,
      approval_id: approvalIdFor(approval.run_id, approval.call_id),
      requested_at: approval.requested_at ?? new Date().toISOString(),
      state: 'pending',
    };
    try {
      await this.kv.create(key(record.run_id, record.approval_id), encodeJson(record));
      return record;
    } catch (error) {
      if (!isAgentMeshError(error, ErrorCode.Conflict)) throw error;
      const existing = await this.get(record.run_id, record.approval_id);
      if (existing === undefined) throw error;
      return existing;
    }
  }

  async get(runId: string, approvalId: string): Promise<ApprovalRecord | undefined> {
    const entry = await this.kv.get(key(runId, approvalId));
    return entry === null ? undefined : parse(entry);
  }

  /**
   * Applies a human's decision once. A repeat of the decision that won (same `request_id`) returns the record with
   * `duplicate: true`. Errors: `not_found`, `already_decided` (naming the recorded decision and who made it).
   */
  async decide(runId: string, decision: ApprovalDecision): Promise<DecidedApproval> {
    for (;;) {
      const entry = await this.kv.get(key(runId, decision.approval_id));
      if (entry === null)
        throw new AgentMeshError(
          ErrorCode.NotFound,
          `run "${runId}" has no approval "${decision.approval_id}"`,
          { retryable: false, details: { run_id: runId, approval_id: decision.approval_id } },
        );
      const current = parse(entry);
      if (current.state !== 'pending') {
        if (isRepeat(current, decision)) return { ...current, duplicate: true };
        throw alreadyDecided(current);
      }
      const decided: ApprovalRecord = {
        ...current,
        state: decision.decision === 'approve' ? 'approved' : 'denied',
        decision: decision.decision,
        by: decision.by ?? 'unknown',
        reason: decision.reason,
        decided_at: new Date().toISOString(),
        ...(decision.request_id === undefined ? {} : { request_id: decision.request_id }),
      };
      try {
        await this.kv.update(entry.key, encodeJson(decided), entry.revision);
        return decided;
      } catch (error) {
        if (!isAgentMeshError(error, ErrorCode.Conflict)) throw error;
      }
    }
  }

  /** True when `decision` repeats the request (same `request_id`) that decided the approval. */
  async isRepeat(runId: string, decision: ApprovalDecision): Promise<boolean> {
    if (decision.request_id === undefined) return false;
    const current = await this.get(runId, decision.approval_id);
    return current !== undefined && isRepeat(current, decision);
  }

  /** Ends a pending approval as denied with reason `timeout`; a decision that came first stands. */
  async expire(runId: string, approvalId: string): Promise<ApprovalRecord> {
    try {
      return await this.decide(runId, {
        approval_id: approvalId,
        decision: 'deny',
        reason: 'timeout',
        by: 'timeout',
      });
    } catch (error) {
      if (!isAgentMeshError(error, 'already_decided')) throw error;
      const current = await this.get(runId, approvalId);
      if (current === undefined) throw error;
      return current;
    }
  }

  /** Approvals of one run, or of every run; pending ones only unless `all`. */
  async list(options: { runId?: string; all?: boolean } = {}): Promise<ApprovalRecord[]> {
    const entries = await readEntries(
      this.kv,
      options.runId === undefined ? undefined : `${options.runId}.>`,
    );
    const out: ApprovalRecord[] = [];
    for (const entry of entries) {
      const record = parse(entry);
      if (options.all === true || record.state === 'pending') out.push(record);
    }
    return out.sort((a, b) => a.requested_at.localeCompare(b.requested_at));
  }

  /** Resolves with the record once it is decided; rejects with `cancelled` when the signal aborts. */
  async waitForDecision(runId: string, approvalId: string, signal: AbortSignal): Promise<ApprovalRecord> {
    let settle: ((record: ApprovalRecord) => void) | undefined;
    const decided = new Promise<ApprovalRecord>((resolve) => (settle = resolve));
    const watcher = await this.kv.watch(
      (entry) => {
        if (entry.operation !== 'PUT') return;
        const record = parse(entry);
        if (record.state !== 'pending') settle?.(record);
      },
      { key: key(runId, approvalId) },
    );
    let onAbort: (() => void) | undefined;
    const aborted = new Promise<never>((_, reject) => {
      onAbort = () =>
        reject(
          new AgentMeshError(ErrorCode.Cancelled, 'stopped waiting for an approval', { retryable: false }),
        );
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    });
    // awaited only by the race below: an abort while the record is read, or after it was found decided, is no
    // unhandled rejection (which ends the process)
    aborted.catch(() => undefined);
    try {
      const current = await this.get(runId, approvalId);
      if (current !== undefined && current.state !== 'pending') return current;
      return await Promise.race([decided, aborted]);
    } finally {
      watcher.stop();
      if (onAbort !== undefined) signal.removeEventListener('abort', onAbort);
    }
  }
}

function key(runId: string, approvalId: string): string {
  return `${runId}.${approvalId}`;
}

function parse(entry: KvEntry): ApprovalRecord {
  const record = decodeMessage(RecordSchema, entry.value, 'approval record') as unknown as ApprovalRecord;
  return assertKnownSchema(`approval record ${entry.key}`, record);
}

function isRepeat(record: ApprovalRecord, decision: ApprovalDecision): boolean {
  return (
    record.state !== 'pending' &&
    decision.request_id !== undefined &&
    record.request_id === decision.request_id &&
    record.decision === decision.decision
  );
}

function alreadyDecided(record: ApprovalRecord): AgentMeshError {
  return new AgentMeshError(
    'already_decided',
    `approval "${record.approval_id}" of run "${record.run_id}" was already decided: ${record.decision ?? record.state}` +
      (record.by === undefined ? '' : ` by ${record.by}`) +
      (record.decided_at === undefined ? '' : ` at ${record.decided_at}`),
    {
      retryable: false,
      details: {
        run_id: record.run_id,
        approval_id: record.approval_id,
        decision: record.decision,
        by: record.by,
        decided_at: record.decided_at,
      },
    },
  );
}
