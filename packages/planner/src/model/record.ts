import type { RunWaiting } from '@agentmesh/protocol';
import { SCHEMA_VERSION } from './versions.js';

/** The KV record of one run id: its owner and lease while it runs, how it ended once finished. */
export interface RunRecord {
  /** The record's format (absent: 1). A planner leaves a run whose record is newer than it understands. */
  schema_version?: number;
  run_id: string;
  /** The planner that owns (or last owned) the run. */
  planner_id: string;
  state: 'running' | 'finished';
  accepted_at: string;
  finished_at?: string;
  status?: string;
  stream_seq?: number;
  /** The task, for listings. */
  task?: string;
  /** Ownership epoch: 1 for the first planner, raised by every takeover. */
  epoch?: number;
  /** Epoch ms until which the owner holds the run without renewing. */
  lease_until?: number;
  /** How many times another planner resumed the run. */
  takeovers?: number;
  /** Set by `agentmesh runs cancel`; the owner (or the planner that resumes the run) cancels it. */
  cancel_requested?: string;
  /** Set while the run waits: for a human decision (`awaiting_approval`) or paused between turns (`paused`). */
  waiting?: RunWaiting;
  /** The run's tenant (`identity.tenant` of its request): the tenant API shows and steers a run only for it. */
  tenant?: string;
  /** A child run's parent, from its request: a parent reads a child's answer only when this names it. */
  parent?: { run_id: string; call_id: string };
  /** A forked run's origin, from its request: the run and the event it starts after (`runs show` lists forks). */
  forked_from?: { run_id: string; seq: number };
}

const dec = new TextDecoder();

/** The one decoder of a stored {@link RunRecord} (run records KV value). */
export function parseRecord(value: Uint8Array): RunRecord {
  return JSON.parse(dec.decode(value)) as RunRecord;
}

type RecordFields = Pick<RunRecord, 'run_id' | 'planner_id'> & {
  [K in Exclude<keyof RunRecord, 'run_id' | 'planner_id'>]?: RunRecord[K] | undefined;
};

/**
 * The one builder of a {@link RunRecord}: `running` and accepted now unless told otherwise; a record with a
 * `status` is `finished` (at `finished_at`, or now). Fields left undefined are left out.
 */
export function runRecord(fields: RecordFields): RunRecord {
  let now: string | undefined;
  const at = () => (now ??= new Date().toISOString());
  const finished = fields.status !== undefined || fields.state === 'finished';
  const record: RunRecord = {
    schema_version: SCHEMA_VERSION,
    run_id: fields.run_id,
    planner_id: fields.planner_id,
    state: finished ? 'finished' : 'running',
    accepted_at: fields.accepted_at ?? at(),
    ...(finished ? { finished_at: fields.finished_at ?? at() } : {}),
  };
  const out = record as unknown as Record<string, unknown>;
  const given = fields as Record<string, unknown>;
  for (const key in given) {
    const value = given[key];
    if (value !== undefined && !(key in out)) out[key] = value;
  }
  return record;
}

/**
 * The record of a run taken for the first time, as {@link runRecord} builds it from `base` (its fields set, none
 * undefined), the planner, epoch 1 and the lease's end: the same fields in the same order, built in one step, for the
 * record create on the path of every submit (runRecord's loop over its fields costs about 15 us there, run cold).
 */
export function firstRunRecord(
  base: Omit<RunRecord, 'planner_id' | 'state' | 'epoch' | 'lease_until'>,
  plannerId: string,
  leaseUntil: number,
): RunRecord {
  return {
    schema_version: SCHEMA_VERSION,
    run_id: base.run_id,
    planner_id: plannerId,
    state: 'running',
    // its run_id again, in the place it has already
    ...(base as Omit<typeof base, 'run_id'>),
    epoch: 1,
    lease_until: leaseUntil,
  };
}
