import {
  TERMINAL_EVENT_TYPES,
  type KvStore,
  type Logger,
  type RunEvent,
  type RunRequest,
} from '@agentmesh/protocol';
import type { RunKeeper } from '../run/ports.js';
import type { RunSnapshot } from '../model/snapshot.js';
import { CheckpointWriter, readCheckpoint } from './checkpoint.js';
import { isNewerSchema, newerSchemaError, schemaVersionOf, SCHEMA_VERSION } from '../model/versions.js';
import type { PlannerInfra, Settlement } from '../infra/backend.js';
import { finishCancelledWhileQueued } from '../infra/queued-end.js';
import { leaseKeeper, recordedOrigin } from './keepers.js';
import { lazyChild } from '../util.js';
import { RunLease, type LeaseClaim } from './lease.js';
import type { PlannerPresence } from './presence.js';

export interface DurableDeps {
  infra: PlannerInfra;
  records: KvStore;
  checkpoints: KvStore;
  plannerId: string;
  leaseMs: number;
  logger: Logger;
  /** This planner's liveness signal: which runs it holds, and whether another planner still holds one. */
  presence?: PlannerPresence | undefined;
  /** True while the planner drains: its runs are handed to other planners at their next turn boundary. */
  draining?: (() => boolean) | undefined;
  /** Runs already reported as too new for this planner (one `run.warning` each, not one per redelivery). */
  newerReported?: Set<string> | undefined;
}

/** A run's id, its request's sequence in the intake stream and, for a run that waited in its tenant's queue, there. */
export type RunIds = { runId: string; streamSeq: number; queuedSeq?: number | undefined };

/**
 * Durability as a wrapper around the executor: takes a run from the intake with a lease and runs it, resumes it from
 * its checkpoint when another planner had it, or leaves it (a finished run is acked, a run another live planner
 * owns is redelivered later).
 */
export async function runDurably(
  deps: DurableDeps,
  request: RunRequest,
  ids: RunIds,
  execute: (keeper: RunKeeper) => Promise<unknown>,
): Promise<Settlement> {
  const held = deps.presence?.claim(ids.runId);
  try {
    return await takeAndRun(deps, request, ids, { execute, attach: held?.attach });
  } finally {
    held?.release();
  }
}

async function takeAndRun(
  deps: DurableDeps,
  request: RunRequest,
  ids: RunIds,
  run: { execute: (keeper: RunKeeper) => Promise<unknown>; attach: ((lease: RunLease) => void) | undefined },
): Promise<Settlement> {
  const log = lazyChild(deps.logger, { run_id: ids.runId });
  const claim = await claimRun(deps, request, ids, log);
  if (claim.kind !== 'acquired') return claim;
  const lease = claim.lease;
  run.attach?.(lease);
  if (lease.lost) return { kind: 'leave' };
  try {
    const resume = claim.previous === undefined ? fresh(ids.queuedSeq) : await readResume(deps, lease, log);
    if (resume === 'finished') return settled(lease);
    if (resume === 'newer') {
      await lease.release('its checkpoint is of a newer schema version: left for a newer planner');
      return settled(lease);
    }
    if (claim.previous !== undefined)
      log.info(
        {
          previous_owner: claim.previous.planner_id,
          epoch: lease.epoch,
          checkpoint: resume.snapshot !== undefined,
          seq: resume.lastSeq,
        },
        'taking over a run whose planner stopped',
      );
    const writer = new CheckpointWriter(deps.checkpoints, lease, resume.revision, log);
    const running = run.execute(leaseKeeper({ lease, writer, log, draining: deps.draining, ...resume }));
    // renewals start once the run's first event is on its way (a new run sends `run.accepted` on this turn)
    queueMicrotask(() => lease.start());
    await running;
    return settled(lease);
  } catch (error) {
    log.error({ err: (error as Error).message }, 'run could not be taken; redelivered later');
    lease.stop();
    return { kind: 'leave' };
  }
}

/**
 * Claims the run's lease, or says what to do with the delivery instead: ack a finished run (storing the final event
 * of one cancelled while it waited in its tenant's queue), redeliver later a run a live planner holds, one whose record
 * is newer than this planner, or one whose record could not be read.
 */
async function claimRun(
  deps: DurableDeps,
  request: RunRequest,
  ids: RunIds,
  log: Logger,
): Promise<Extract<LeaseClaim, { kind: 'acquired' }> | Settlement> {
  let claim: LeaseClaim;
  try {
    const base = {
      run_id: ids.runId,
      accepted_at: new Date().toISOString(),
      stream_seq: ids.streamSeq,
      task: request.task.slice(0, 200),
      ...recordedOrigin(request),
    };
    claim = await RunLease.acquire(deps.records, base, {
      plannerId: deps.plannerId,
      leaseMs: deps.leaseMs,
      log,
      holderGone: deps.presence && ((plannerId, id) => deps.presence!.holderGone(plannerId, id)),
    });
  } catch (error) {
    log.warn({ err: (error as Error).message }, 'run record unavailable; the run is redelivered later');
    return { kind: 'nak', delayMs: 1_000 };
  }
  if (claim.kind === 'finished') {
    log.info({ status: claim.record.status }, 'run already finished: not run again');
    // cancelled while it waited in its tenant's queue: its final event, if its canceller stopped before storing it
    if (ids.queuedSeq !== undefined)
      await finishCancelledWhileQueued(deps.infra, claim.record).catch((error: unknown) =>
        log.warn({ err: (error as Error).message }, 'final event of a run cancelled while queued not stored'),
      );
    return { kind: 'ack' };
  }
  if (claim.kind === 'held') {
    log.debug(
      { owner: claim.record.planner_id, retry_in_ms: claim.retryInMs },
      'run owned by a live planner',
    );
    return { kind: 'nak', delayMs: claim.retryInMs };
  }
  if (claim.kind === 'newer') {
    await reportNewer(deps, ids.runId, claim.record, log);
    return { kind: 'nak', delayMs: claim.retryInMs };
  }
  return claim;
}

interface Resume {
  snapshot: RunSnapshot | undefined;
  revision: number | undefined;
  lastSeq: number;
  earlier: RunEvent[];
  queued?: boolean;
}

/** A run's first start: its events begin after the ones the fair intake stored while it waited (`queuedSeq`). */
function fresh(queuedSeq: number | undefined): Resume {
  const lastSeq = queuedSeq ?? 0;
  return {
    snapshot: undefined,
    revision: undefined,
    lastSeq,
    earlier: [],
    ...(lastSeq > 0 ? { queued: true } : {}),
  };
}

/**
 * The intake message is acked only once the run record says finished: when the finishing write did not land (the
 * runs bucket was electing a leader), it is left for redelivery, and the planner that takes it marks it finished.
 */
function settled(lease: RunLease): Settlement {
  if (lease.released) return { kind: 'nak', delayMs: 0 };
  return lease.lost || !lease.finished ? { kind: 'leave' } : { kind: 'ack' };
}

/** What a takeover continues from: the last checkpoint and the events already stored ('finished' when it had ended). */
async function readResume(
  deps: DurableDeps,
  lease: RunLease,
  log: Logger,
): Promise<Resume | 'finished' | 'newer'> {
  const runId = lease.runId;
  const last = await deps.infra.lastStoredEvent(runId);
  if (last !== undefined && TERMINAL_EVENT_TYPES.has(last.type)) {
    const status = last.type === 'run.completed' ? last.status : 'failed';
    log.info({ status }, 'run had ended before its planner stopped: marked finished, not run again');
    await lease.finish({ status, finished_at: last.ts });
    await deps.checkpoints.delete(runId).catch(() => undefined);
    return 'finished';
  }
  const stored = await readCheckpoint(deps.checkpoints, runId);
  if (stored !== undefined && isNewerSchema(stored.checkpoint)) {
    await reportNewer(deps, runId, stored.checkpoint, log);
    return 'newer';
  }
  const snapshot = stored?.checkpoint.snapshot;
  const earlier =
    last === undefined
      ? []
      : await deps.infra.readRunEvents(runId).catch((error: unknown) => {
          log.warn(
            { err: (error as Error).message },
            'earlier events not read: the transcript starts at the takeover',
          );
          return [];
        });
  return {
    snapshot,
    revision: stored?.revision,
    lastSeq: Math.max(last?.seq ?? 0, snapshot?.seq ?? 0),
    earlier,
    // a run whose planner stopped before it started it (only the intake's `run.accepted` or the fair intake's
    // `run.queued` stored): this is its first start, not a takeover
    ...(snapshot === undefined && (last?.type === 'run.queued' || last?.type === 'run.accepted')
      ? { queued: true }
      : {}),
  };
}

/**
 * A run whose record (or checkpoint) a newer planner wrote is not taken, and nothing of it is written but one
 * `run.warning` appended to its event log (after its last event, so a newer planner that resumes it continues after
 * the warning), and a log line. The run is only reported while no live planner holds it.
 */
async function reportNewer(deps: DurableDeps, runId: string, record: unknown, log: Logger): Promise<void> {
  const reported = deps.newerReported;
  const version = schemaVersionOf(record);
  const message = newerSchemaError(`run "${runId}"`, record).message;
  if (reported?.has(runId) === true) return;
  reported?.add(runId);
  log.warn({ schema_version: version, supported: SCHEMA_VERSION }, message);
  try {
    const last = await deps.infra.lastStoredEvent(runId);
    const publisher = deps.infra.eventPublisher(runId);
    publisher.publish({
      type: 'run.warning',
      run_id: runId,
      seq: (last?.seq ?? 0) + 1,
      ts: new Date().toISOString(),
      code: 'schema_version',
      message,
    });
    await publisher.flush();
  } catch (error) {
    log.debug({ err: (error as Error).message }, 'run.warning about a newer run not written');
  }
}
