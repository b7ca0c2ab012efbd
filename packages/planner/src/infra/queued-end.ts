import type { RunRecord } from '../model/record.js';
import { RunEventSink, runCompleted } from '../run/events.js';
import type { PlannerInfra } from './backend.js';

/**
 * Stores the final event of a run cancelled while it waited in its tenant's queue: `run.completed {status:
 * cancelled}` right after its `run.queued` (seq `afterSeq`), what a started run that is cancelled ends with.
 */
export async function storeCancelledWhileQueued(
  infra: Pick<PlannerInfra, 'eventPublisher'>,
  runId: string,
  afterSeq: number,
  reason: string,
): Promise<void> {
  const publisher = infra.eventPublisher(runId);
  new RunEventSink(runId, publisher.publish, { lastSeq: afterSeq }).emit(
    runCompleted('cancelled', `cancelled: ${reason}`, undefined),
  );
  await publisher.flush();
}

/**
 * A run taken from its tenant's queue whose record says it was cancelled while it waited: stores its final event
 * when the planner that cancelled it stopped before it did (its last event is still `run.queued`).
 */
export async function finishCancelledWhileQueued(
  infra: Pick<PlannerInfra, 'eventPublisher' | 'lastStoredEvent'>,
  record: RunRecord,
): Promise<void> {
  if (record.status !== 'cancelled') return;
  const last = await infra.lastStoredEvent(record.run_id);
  if (last?.type !== 'run.queued') return;
  await storeCancelledWhileQueued(
    infra,
    record.run_id,
    last.seq,
    record.cancel_requested ?? 'cancel requested',
  );
}
