import {
  AgentMeshError,
  DEFAULT_TENANT,
  ErrorCode,
  encodeJson,
  isAgentMeshError,
  type KvStore,
  type Logger,
  type RunEvent,
  type RunRequest,
  type RunWaiting,
} from '@agentmesh/protocol';
import type { RunHandle, RunKeeper } from '../run/ports.js';
import type { CheckpointHook, RunSnapshot } from '../model/snapshot.js';
import type { CheckpointWriter } from './checkpoint.js';
import { leaseLostError, type RunLease } from './lease.js';
import { parseRecord, runRecord, type RunRecord } from '../model/record.js';

/**
 * The keeper of a run that is not durable: its record is created on accept (a second run with the same id is
 * refused with `conflict`) and marked finished at its end.
 */
export async function claimRecord(
  records: KvStore,
  fields: {
    runId: string;
    plannerId: string;
    request: RunRequest;
    streamSeq?: number | undefined;
    /** Continue from this checkpoint (the run id was claimed by the run that wrote it). */
    resume?: RunSnapshot | undefined;
    /** The seq of the run's last stored event: a resumed run numbers its events after it (and the snapshot's). */
    lastStoredSeq?: number | undefined;
  },
): Promise<RunKeeper> {
  const { resume } = fields;
  const accepted = runRecord({
    run_id: fields.runId,
    planner_id: fields.plannerId,
    stream_seq: fields.streamSeq,
    accepted_at: resume?.started_at,
    ...recordedOrigin(fields.request),
  });
  await storeAccepted(records, accepted, resume === undefined);
  return {
    ...(resume === undefined
      ? {}
      : {
          resume: {
            snapshot: resume,
            lastSeq: Math.max(resume.seq, fields.lastStoredSeq ?? 0),
            earlier: [],
          },
        }),
    checkpoints: (_flush, user) => ({ checkpoint: user }),
    attach: () => undefined,
    handedOff: false,
    setWaiting: (waiting) => setRecordWaiting(records, fields.runId, waiting),
    finish: async (status, endedAt) => {
      const record = runRecord({
        run_id: fields.runId,
        planner_id: fields.plannerId,
        accepted_at: accepted.accepted_at,
        finished_at: endedAt,
        status,
        task: fields.request.task.slice(0, 200),
        parent: accepted.parent,
        forked_from: accepted.forked_from,
        tenant: accepted.tenant,
      });
      await records.put(fields.runId, encodeJson(record));
    },
  };
}

/** Stores a run's accepted record: created (a run id already taken is `conflict`), or put over for a resumed run. */
async function storeAccepted(records: KvStore, accepted: RunRecord, fresh: boolean): Promise<void> {
  const runId = accepted.run_id;
  try {
    if (fresh) await records.create(runId, encodeJson(accepted));
    else await records.put(runId, encodeJson(accepted));
  } catch (error) {
    if (isAgentMeshError(error, ErrorCode.Conflict))
      throw new AgentMeshError(
        ErrorCode.Conflict,
        `run "${runId}" was already submitted; a run id is run once`,
        {
          retryable: false,
          details: { run_id: runId },
        },
      );
    throw error;
  }
}

/**
 * Sets the waiting state of a run's record, as a compare-and-set: a waiting state read before the run's end must not
 * write over its finished record.
 */
async function setRecordWaiting(
  records: KvStore,
  runId: string,
  waiting: RunWaiting | undefined,
): Promise<void> {
  for (;;) {
    const entry = await records.get(runId);
    if (entry === null) return;
    const current = parseRecord(entry.value);
    if (current.state === 'finished') return;
    try {
      await records.update(runId, encodeJson({ ...current, waiting }), entry.revision);
      return;
    } catch (error) {
      if (!isAgentMeshError(error, ErrorCode.Conflict)) throw error;
    }
  }
}

export interface LeasedRun {
  lease: RunLease;
  writer: CheckpointWriter;
  snapshot: RunSnapshot | undefined;
  lastSeq: number;
  earlier: RunEvent[];
  /** The earlier events are the intake's (`run.accepted`, `run.queued`): the run starts, it is not resumed. */
  queued?: boolean | undefined;
  log: Logger;
  /** True while the planner drains: the run is handed to another planner at its next turn boundary. */
  draining?: (() => boolean) | undefined;
}

/** Why a draining planner stops a run: another planner continues it from the checkpoint just written. */
export const DRAIN_HANDOFF = 'the planner is draining: handed to another planner at a turn boundary';

/**
 * The keeper of a durable run: the lease fences the run when ownership is lost, every checkpoint is written to KV
 * (after the events before it are stored), and the end is a compare-and-set on the run record.
 */
export function leaseKeeper(run: LeasedRun): RunKeeper {
  const { lease, writer } = run;
  return {
    resume: {
      snapshot: run.snapshot,
      lastSeq: run.lastSeq,
      earlier: run.earlier,
      ...(run.queued === true ? { queued: true } : {}),
    },
    checkpoints: (flush, user) => {
      const durable =
        (then: CheckpointHook | undefined, boundary: boolean): CheckpointHook =>
        async (snap) => {
          lease.assertOwned();
          await flush();
          lease.assertOwned();
          await writer.write(snap);
          if (then) await then(snap);
          if (boundary && run.draining?.() === true && snap.phase !== 'finished') {
            await lease.release(DRAIN_HANDOFF);
            lease.assertOwned();
          }
        };
      return { checkpoint: durable(user, true), resultCheckpoint: durable(undefined, false) };
    },
    attach: (handle: RunHandle) => {
      lease.onLost((why) => handle.fence(leaseLostError(lease.runId, why)));
      lease.onCancelRequested((reason) => handle.cancel(reason));
    },
    get handedOff() {
      return lease.lost;
    },
    giveUp: (why) => lease.fence(why),
    setWaiting: (waiting) => lease.setWaiting(waiting),
    finish: async (status, endedAt) => {
      // the run's end is in its event log already: the record and the checkpoint are written side by side
      const [finished] = await Promise.allSettled([
        lease.finish({ status, finished_at: endedAt }),
        writer.clear(lease.runId),
      ]);
      if (finished.status === 'rejected') throw finished.reason;
    },
  };
}

/**
 * The `parent` of a child run's record, the `forked_from` of a fork's (none for a top-level run) and the run's
 * tenant (left out for `default`, so the records of a single-team fleet stay as they were).
 */
export function recordedOrigin(request: RunRequest): Pick<RunRecord, 'parent' | 'forked_from' | 'tenant'> {
  const tenant = request.identity?.tenant ?? DEFAULT_TENANT;
  const origin: Pick<RunRecord, 'parent' | 'forked_from' | 'tenant'> = {};
  if (tenant !== DEFAULT_TENANT) origin.tenant = tenant;
  if (request.parent !== undefined)
    origin.parent = { run_id: request.parent.run_id, call_id: request.parent.call_id };
  if (request.fork !== undefined) origin.forked_from = { run_id: request.fork.run_id, seq: request.fork.seq };
  return origin;
}
