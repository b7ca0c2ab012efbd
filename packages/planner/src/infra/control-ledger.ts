import { createHash } from 'node:crypto';
import {
  AgentMeshError,
  ErrorCode,
  decodeMessage,
  encodeJson,
  isAgentMeshError,
  isTransientFailure,
  retry,
  type KvStore,
} from '@agentmesh/protocol';
import { z } from 'zod';

/** How long the "done" mark of an applied request is tried through a NATS fault (a node restarting). */
const DONE_WRITE_MS = 30_000;

/** What a control request did, as its first answer said. */
export type ControlOutcomeValue = Record<string, unknown>;

const EntrySchema = z.object({
  kind: z.string(),
  state: z.enum(['claimed', 'done']),
  claim: z.record(z.string(), z.unknown()),
  outcome: z.record(z.string(), z.unknown()).optional(),
  at: z.string(),
});
type LedgerEntry = z.infer<typeof EntrySchema>;

/** The answer to a control request: its outcome, and whether an earlier request with its id had it. */
export interface LedgerResult {
  outcome: ControlOutcomeValue;
  duplicate: boolean;
}

/**
 * The request ids of control requests (input, pause, resume, trigger) with their outcomes, kept in a KV bucket
 * (keys `<run_id>.request.<hash>`), so that whichever planner gets a repeat answers it with the first outcome. A
 * request is claimed first (a compare-and-set create that names what it will write, e.g. the input's key), then
 * applied, then marked done: a repeat of a claim whose planner died re-applies that same effect.
 */
export class ControlLedger {
  constructor(private readonly kv: KvStore) {}

  /**
   * Applies a request once per `requestId`: `apply(claim)` runs for the first request (or again after a claim
   * left unfinished) and its outcome is recorded; a repeat gets the recorded outcome with `duplicate: true`. Errors:
   * `invalid_request` when the id was used for a different kind of request.
   */
  async once(
    runId: string,
    requestId: string,
    kind: string,
    claim: ControlOutcomeValue,
    apply: (claim: ControlOutcomeValue) => Promise<ControlOutcomeValue>,
  ): Promise<LedgerResult> {
    const key = ledgerKey(runId, requestId);
    const fresh: LedgerEntry = { kind, state: 'claimed', claim, at: new Date().toISOString() };
    let entry = fresh;
    try {
      await this.kv.create(key, encodeJson(fresh));
    } catch (error) {
      if (!isAgentMeshError(error, ErrorCode.Conflict)) throw error;
      const existing = await this.kv.get(key);
      if (existing === null) throw error;
      entry = decodeMessage(EntrySchema, existing.value, 'control request record');
      if (entry.kind !== kind)
        throw new AgentMeshError(
          ErrorCode.InvalidRequest,
          `request_id "${requestId}" was already used for a ${entry.kind} request of run "${runId}", not ${kind}`,
          { retryable: false, details: { run_id: runId, request_id: requestId, kind: entry.kind } },
        );
      if (entry.state === 'done') return { outcome: entry.outcome ?? {}, duplicate: true };
    }
    const outcome = await apply(entry.claim);
    // applied: a repeat must now find it done, or it would apply it again (a trigger queued twice)
    const done = encodeJson({ ...entry, state: 'done', outcome });
    await retry(() => this.kv.put(key, done), {
      timeoutMs: DONE_WRITE_MS,
      capMs: 1_000,
      retryable: (error) => isTransientFailure(error),
    });
    return { outcome, duplicate: entry !== fresh };
  }
}

function ledgerKey(runId: string, requestId: string): string {
  return `${runId}.request.${createHash('sha256').update(requestId).digest('hex').slice(0, 32)}`;
}
