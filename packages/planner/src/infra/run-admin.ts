import {
  DEFAULT_PREFIX,
  ErrorCode,
  encodeJson,
  isAgentMeshError,
  requestJson,
  RunCancelReplySchema,
  subjects,
  type Backend,
  type RunEvent,
  readEntries,
} from '@agentmesh/protocol';
import { parseRecord } from '../model/record.js';
import { lastStoredEvent, readRunEvents } from './backend.js';
import {
  openRunRecords,
  readRunRecord,
  readTranscript,
  type RunRecord,
  type RunTranscript,
} from './transcripts.js';

/** The run records of the fleet, newest first (at most `limit`, default 50; `state` filters). */
export async function listRuns(
  bus: Backend,
  options: { prefix?: string; limit?: number; state?: RunRecord['state'] } = {},
): Promise<RunRecord[]> {
  const kv = await openRunRecords(bus, options.prefix);
  const records: RunRecord[] = [];
  for (const entry of await readEntries(kv)) {
    const record = parseRecord(entry.value);
    if (options.state === undefined || record.state === options.state) records.push(record);
  }
  records.sort((a, b) => b.accepted_at.localeCompare(a.accepted_at) || a.run_id.localeCompare(b.run_id));
  return records.slice(0, Math.max(1, options.limit ?? 50));
}

/** Everything known about one run: its record, its stored events, (once finished) its transcript, and its forks. */
export interface RunDetails {
  record: RunRecord | null;
  events: RunEvent[];
  transcript: RunTranscript | null;
  /** Runs forked from this one (from their run records), oldest first. */
  forks: RunFork[];
}

/** A run forked from another: its id, the seq of the original it starts after, and how it stands. */
export interface RunFork {
  run_id: string;
  seq: number;
  state: RunRecord['state'];
  status?: string | undefined;
  accepted_at: string;
}

/**
 * The runs forked from `runId`: a scan of the run records (one read of the bucket, as `runs list` does) for those
 * whose `forked_from` names it.
 */
export async function listForks(
  bus: Backend,
  runId: string,
  options: { prefix?: string } = {},
): Promise<RunFork[]> {
  const kv = await openRunRecords(bus, options.prefix);
  const forks: RunFork[] = [];
  for (const entry of await readEntries(kv)) {
    const record = parseRecord(entry.value);
    if (record.forked_from?.run_id !== runId) continue;
    forks.push({
      run_id: record.run_id,
      seq: record.forked_from.seq,
      state: record.state,
      ...(record.status === undefined ? {} : { status: record.status }),
      accepted_at: record.accepted_at,
    });
  }
  return forks.sort((a, b) => a.accepted_at.localeCompare(b.accepted_at) || a.run_id.localeCompare(b.run_id));
}

export async function showRun(
  bus: Backend,
  runId: string,
  options: { prefix?: string } = {},
): Promise<RunDetails> {
  const [record, events, transcript, forks] = await Promise.all([
    readRunRecord(bus, runId, options),
    readRunEvents(bus, runId, options),
    readTranscript(bus, runId, options),
    listForks(bus, runId, options),
  ]);
  return { record, events, transcript, forks };
}

/** A cancel's view of the run: its record as it was, with `queued` when the run waited and this cancel ended it. */
export type CancelledRun = RunRecord & { queued?: true };

/** Whether a cancel took effect: the run was running, or waited in its tenant's queue and ended now. */
export function cancelTookEffect(run: CancelledRun): boolean {
  return run.queued === true || run.state !== 'finished';
}

/** How long a cancel waits for a planner to end a run waiting in its tenant's queue. */
const QUEUED_CANCEL_TIMEOUT_MS = 10_000;

/**
 * Cancels a run wherever it runs: publishes on `runs.<id>.cancel` (the owning planner stops it now) and marks its
 * record, so a planner that takes the run over after a failover cancels it too. Returns the record as it was, or
 * null for an unknown run id. A run waiting in its tenant's queue (fair intake: no record yet, `run.queued` last)
 * is ended by a planner at once: the answer is its record, finished `cancelled`, with `queued: true`. With
 * `publishFirst` the cancel is published at once, before the record is read (a parent stopping its children: they
 * stop now, the mark is for a planner that takes one over). Sending it again is safe (the mark is set once;
 * `requestId` travels in the cancel message for the logs).
 */
export async function cancelRun(
  bus: Backend,
  runId: string,
  options: { prefix?: string; reason?: string; publishFirst?: boolean; requestId?: string } = {},
): Promise<CancelledRun | null> {
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  const reason = options.reason ?? 'cancel requested';
  const body = options.requestId === undefined ? { reason } : { reason, request_id: options.requestId };
  const publish = () => bus.publish(subjects(prefix).runCancel(runId), encodeJson(body));
  if (options.publishFirst === true) publish();
  const kv = await openRunRecords(bus, prefix);
  let asked: { waiting: boolean; ended?: boolean; error?: unknown } | undefined;
  for (let attempt = 1; ; attempt++) {
    const entry = await kv.get(runId);
    if (entry === null) {
      if (asked?.error !== undefined) throw asked.error;
      if (asked !== undefined) return null;
      asked = await cancelWaiting(bus, prefix, runId, body);
      if (!asked.waiting) return null;
      continue;
    }
    const record = parseRecord(entry.value);
    if (asked?.ended === true) return { ...record, queued: true };
    if (record.state === 'finished') return record;
    try {
      await kv.update(runId, encodeJson({ ...record, cancel_requested: reason }), entry.revision);
      if (options.publishFirst !== true) publish();
      await bus.flush();
      return record;
    } catch (error) {
      if (!isAgentMeshError(error, ErrorCode.Conflict) || attempt >= 10) throw error;
    }
  }
}

/**
 * A run without a record that waits in its tenant's queue is ended by the planners (they write its final event and
 * its tenant's waiting count): asks them on `runs.<id>.cancel`. `waiting` when the run waited; `ended` when a
 * planner ended it; `error` when none answered.
 */
async function cancelWaiting(
  bus: Backend,
  prefix: string,
  runId: string,
  body: { reason: string; request_id?: string },
): Promise<{ waiting: boolean; ended?: boolean; error?: unknown }> {
  if (!bus.durable) return { waiting: false };
  const last = await lastStoredEvent(bus, runId, prefix);
  if (last?.type !== 'run.queued') return { waiting: false };
  try {
    const reply = await requestJson(bus, subjects(prefix).runCancel(runId), body, RunCancelReplySchema, {
      timeoutMs: QUEUED_CANCEL_TIMEOUT_MS,
    });
    return { waiting: true, ended: reply.queued === true };
  } catch (error) {
    return { waiting: true, ended: false, error };
  }
}
