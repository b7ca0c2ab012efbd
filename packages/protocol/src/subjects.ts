import { assertToolName } from './names.js';

export const DEFAULT_PREFIX = 'agentmesh';
export const RUNS_STREAM = 'AGENTMESH_RUNS';
export const EVENTS_STREAM = 'AGENTMESH_EVENTS';
export const CATALOG_BUCKET = 'agentmesh_catalog';
export const ARTIFACTS_BUCKET = 'agentmesh_artifacts';
export const RUN_ID_PATTERN = /^[A-Za-z0-9_-]{1,128}$/;

/** Service names announced on NATS service discovery (`$SRV.PING`). */
export const ServiceName = {
  Catalog: 'agentmesh-catalog',
  Planner: 'agentmesh-planner',
  ToolWorker: 'agentmesh-tool-worker',
} as const;

/** Builds every subject of the contract under one prefix (`agentmesh` unless AGENTMESH_PREFIX says otherwise). */
export function subjects(prefix: string = DEFAULT_PREFIX) {
  return {
    prefix,
    runsSubmit: `${prefix}.runs.submit`,
    runEvents: (runId: string) => `${prefix}.runs.${runId}.events`,
    allRunEvents: `${prefix}.runs.*.events`,
    runCancel: (runId: string) => `${prefix}.runs.${runId}.cancel`,
    allRunCancels: `${prefix}.runs.*.cancel`,
    /** Triggers for a daemon run, queued durably by any live planner. */
    runTrigger: (runId: string) => `${prefix}.runs.${runId}.trigger`,
    allRunTriggers: `${prefix}.runs.*.trigger`,
    /** Planners announce here which paths their daemons want watched (`DaemonWatchSchema`); workspace workers listen. */
    daemonWatch: `${prefix}.daemons.watch`,
    toolInvoke: (toolName: string) => {
      assertToolName(toolName);
      return `${prefix}.tool.invoke.${toolName}`;
    },
    allToolInvokes: `${prefix}.tool.invoke.>`,
    /** Where a worker reports progress of one call to the planner that made it. */
    toolProgress: (runId: string) => `${prefix}.runs.${runId}.progress`,
    catalogRegister: `${prefix}.catalog.register`,
    catalogDeregister: `${prefix}.catalog.deregister`,
    catalogHeartbeat: `${prefix}.catalog.heartbeat`,
    catalogList: `${prefix}.catalog.list`,
    catalogGet: `${prefix}.catalog.get`,
    catalogSearch: `${prefix}.catalog.search`,
    artifactFetch: `${prefix}.artifacts.fetch`,
    /** Broadcast to every catalog replica: a worker's tools can (not) run now (an MCP server reconnecting). */
    catalogAvailability: `${prefix}.catalog.availability`,
    /** Where a planner answers whether it still holds a run (its liveness signal for fast failover). */
    plannerHolds: (plannerId: string) =>
      `${prefix}.planners.${plannerId.replace(/[^A-Za-z0-9_-]/g, '_')}.holds`,
    allPlannerHolds: `${prefix}.planners.*.holds`,
  };
}
export type Subjects = ReturnType<typeof subjects>;

/** The queue group every replica of a tool joins, so replicas share calls. */
export function toolQueueGroup(toolName: string): string {
  return `tool.${toolName}`;
}

/** The human-in-the-loop subjects of a run: approvals (request/reply, any planner answers), input, pause, resume. */
export function runControlSubjects(prefix: string = DEFAULT_PREFIX) {
  return {
    approve: (runId: string) => `${prefix}.runs.${runId}.approve`,
    allApprovals: `${prefix}.runs.*.approve`,
    input: (runId: string) => `${prefix}.runs.${runId}.input`,
    pause: (runId: string) => `${prefix}.runs.${runId}.pause`,
    resume: (runId: string) => `${prefix}.runs.${runId}.resume`,
    allInputs: `${prefix}.runs.*.input`,
    allPauses: `${prefix}.runs.*.pause`,
    allResumes: `${prefix}.runs.*.resume`,
  } as const;
}
