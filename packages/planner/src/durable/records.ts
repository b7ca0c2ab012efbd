import type { RunRecord } from '../transcript.js';

type RecordFields = Pick<RunRecord, 'run_id' | 'planner_id'> & {
  [K in Exclude<keyof RunRecord, 'run_id' | 'planner_id'>]?: RunRecord[K] | undefined;
};

/**
 * The one builder of a {@link RunRecord}: `running` and accepted now unless told otherwise; a record with a
 * `status` is `finished` (at `finished_at`, or now). Fields left undefined are left out.
 */
export function runRecord(fields: RecordFields): RunRecord {
  const now = new Date().toISOString();
  const finished = fields.status !== undefined || fields.state === 'finished';
  const record: RunRecord = {
    run_id: fields.run_id,
    planner_id: fields.planner_id,
    state: finished ? 'finished' : 'running',
    accepted_at: fields.accepted_at ?? now,
    ...(finished ? { finished_at: fields.finished_at ?? now } : {}),
  };
  const out = record as unknown as Record<string, unknown>;
  const given = fields as Record<string, unknown>;
  for (const key in given) {
    const value = given[key];
    if (value !== undefined && !(key in out)) out[key] = value;
  }
  return record;
}
