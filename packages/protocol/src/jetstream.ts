import type { Backend, EventLog, WorkQueue } from './backend/types.js';
import { DEFAULT_PREFIX, EVENTS_STREAM, RUNS_STREAM, subjects } from './subjects.js';

export type { DiscoveredService, ServiceHandle } from './backend/types.js';

/** Stream names for a prefix: `AGENTMESH_RUNS` / `AGENTMESH_EVENTS` for the default prefix. */
export function streamNames(prefix: string = DEFAULT_PREFIX): { runs: string; events: string } {
  if (prefix === DEFAULT_PREFIX) return { runs: RUNS_STREAM, events: EVENTS_STREAM };
  const p = prefix.toUpperCase().replace(/[^A-Z0-9]/g, '_');
  return { runs: `${p}_RUNS`, events: `${p}_EVENTS` };
}

export interface RunStreamOptions {
  /** How long events are kept for replay (default 7 days). */
  eventsMaxAgeMs?: number;
  /** Window in which a resubmitted run id is dropped by the server (default 10 minutes). */
  duplicateWindowMs?: number;
}

/**
 * The durable run intake of a prefix (`runs.submit` into the runs stream, and the tenants' waiting runs on
 * `queued.<tenant>.<priority>`), created or updated.
 */
export function openRunIntake(
  backend: Backend,
  prefix: string = DEFAULT_PREFIX,
  options: RunStreamOptions = {},
): Promise<WorkQueue> {
  return backend.workQueue({
    stream: streamNames(prefix).runs,
    subject: subjects(prefix).runsSubmit,
    moreSubjects: [subjects(prefix).allQueuedRuns],
    ...(options.duplicateWindowMs === undefined ? {} : { duplicateWindowMs: options.duplicateWindowMs }),
  });
}

/** The run event log of a prefix (every `runs.<id>.events`), created or updated. */
export function openRunEventLog(
  backend: Backend,
  prefix: string = DEFAULT_PREFIX,
  options: RunStreamOptions = {},
): Promise<EventLog> {
  return backend.eventLog({
    stream: streamNames(prefix).events,
    subjects: subjects(prefix).allRunEvents,
    ...(options.eventsMaxAgeMs === undefined ? {} : { maxAgeMs: options.eventsMaxAgeMs }),
  });
}

/** Creates or updates the run intake (work queue) and run events (limits, replayable) streams. */
export async function ensureRunStreams(
  backend: Backend,
  prefix: string = DEFAULT_PREFIX,
  options: RunStreamOptions = {},
): Promise<{ runs: string; events: string }> {
  await openRunIntake(backend, prefix, options);
  await openRunEventLog(backend, prefix, options);
  return streamNames(prefix);
}
