import {
  ErrorCode,
  encodeJson,
  isAgentMeshError,
  type KvStore,
  type Logger,
  type RunEvent,
} from '@agentmesh/protocol';
import { runRecord, type RunRecord } from '../model/record.js';
import type { EventPublisher } from '../run/ports.js';
import { storeCancelledWhileQueued } from '../infra/queued-end.js';
import type { QueuedSet } from './queued-set.js';
import type { WaitingPlace } from './waiting-message.js';

/** What a cancel found for a run that may wait in its tenant's queue. */
export type QueuedCancel =
  /** No record and no `run.queued` as its last event (or the run is another tenant's): not a waiting run. */
  | { kind: 'not_queued' }
  /** The run has a record (it started, ended, or was cancelled before): the cancel of a started run applies. */
  | { kind: 'recorded' }
  /** This cancel ended the waiting run: its record says cancelled and `run.completed` is stored. */
  | { kind: 'cancelled'; tenant: string; record: RunRecord };

export interface QueuedCancelDeps {
  records: KvStore;
  plannerId: string;
  logger: Logger;
  /** The run's stored events (a waiting run has two: `run.accepted`, `run.queued`). */
  readRunEvents(runId: string): Promise<RunEvent[]>;
  eventPublisher(runId: string): EventPublisher;
  /** The bounded tenants' waiting runs (`max_queued_runs`). */
  waiting: QueuedSet;
  /** Deletes the run's message from its tenant's queue: true when one was deleted. */
  removeWaiting(runId: string, place: WaitingPlace): Promise<boolean>;
}

/**
 * Cancels a run that waits in the fair intake. A waiting run has no run record (a planner creates it when the run
 * starts) and `run.queued` as its last stored event. The cancel creates its record, finished with status
 * `cancelled`, by compare-and-set: if a planner started the run first the create fails (`recorded`), and a planner
 * that takes the run from its queue later finds the record finished and acks it without running it. The winner then
 * stores `run.completed {status: cancelled}` (what a cancelled started run ends with), takes the run out of its
 * tenant's `max_queued_runs` count and deletes its message from the tenant's queue, which stops counting it at once
 * (only after `run.completed` is stored: a canceller that stops before leaves the message to the planner that takes
 * it, which stores the end). With `tenant`, a run of another tenant is `not_queued` (no oracle).
 */
export async function cancelQueuedRun(
  deps: QueuedCancelDeps,
  runId: string,
  reason: string,
  tenant?: string,
): Promise<QueuedCancel> {
  if ((await deps.records.get(runId)) !== null) return { kind: 'recorded' };
  const events = await deps.readRunEvents(runId);
  const last = events.at(-1);
  if (last?.type !== 'run.queued' || (tenant !== undefined && last.tenant !== tenant))
    return { kind: 'not_queued' };
  const accepted = events[0]?.type === 'run.accepted' ? events[0] : undefined;
  const record = runRecord({
    run_id: runId,
    planner_id: deps.plannerId,
    status: 'cancelled',
    accepted_at: accepted?.ts,
    task: accepted?.task.slice(0, 200),
    tenant: last.tenant,
    cancel_requested: reason,
  });
  try {
    await deps.records.create(runId, encodeJson(record));
  } catch (error) {
    if (isAgentMeshError(error, ErrorCode.Conflict)) return { kind: 'recorded' };
    throw error;
  }
  await storeCancelledWhileQueued(deps, runId, last.seq, reason);
  await deps.waiting.remove(last.tenant, runId).catch((error: unknown) => {
    deps.logger.warn(
      { run_id: runId, tenant: last.tenant, err: (error as Error).message },
      'cancelled run left in the waiting count until a planner takes it from the queue',
    );
  });
  const removed = await removeMessage(deps, runId, last);
  deps.logger.info(
    { run_id: runId, tenant: last.tenant, reason, message_removed: removed },
    'queued run cancelled before it started',
  );
  return { kind: 'cancelled', tenant: last.tenant, record };
}

/** Deletes the cancelled run's queue message; a failure leaves it to the planner that takes it (it drops it). */
async function removeMessage(
  deps: QueuedCancelDeps,
  runId: string,
  queued: { tenant: string; priority: number; submit_seq?: number | undefined },
): Promise<boolean> {
  const place = { tenant: queued.tenant, priority: queued.priority, submitSeq: queued.submit_seq };
  return deps.removeWaiting(runId, place).catch((error: unknown) => {
    deps.logger.warn(
      { run_id: runId, tenant: queued.tenant, err: (error as Error).message },
      'cancelled run counted as queued until a planner takes its message from the queue and drops it',
    );
    return false;
  });
}
