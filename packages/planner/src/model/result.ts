import type { RunEventOf } from '@agentmesh/protocol';

/** How a run ended: its final event, `run.completed` or `run.failed`. */
export type RunResult = RunEventOf<'run.completed'> | RunEventOf<'run.failed'>;
