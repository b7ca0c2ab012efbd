import { AgentMeshError, ErrorCode } from './errors.js';
import { assertToolName } from './names.js';
import { TENANT_NAME_PATTERN } from './schemas/tenants.js';

export const DEFAULT_PREFIX = 'agentmesh';
export const RUNS_STREAM = 'AGENTMESH_RUNS';
export const EVENTS_STREAM = 'AGENTMESH_EVENTS';
export const CATALOG_BUCKET = 'agentmesh_catalog';
export const ARTIFACTS_BUCKET = 'agentmesh_artifacts';
/**
 * Reply subjects a responder answers on: inboxes (`_INBOX.…`, `_INBOX_<user>.…`). A responder may publish on the
 * reply subject of any request it gets, so a request whose reply subject names a fleet subject
 * (`agentmesh.runs.<id>.cancel`) would make it publish there for the requester.
 */
export const INBOX_SUBJECT = /^_INBOX[._]/;
export const RUN_ID_PATTERN = /^[A-Za-z0-9_-]{1,128}$/;
/** The last token of one worker's own tool subject: it starts with an uppercase letter, which no tool name does. */
export const WORKER_SUBJECT_TOKEN = /^[A-Z][A-Za-z0-9_-]{0,63}$/;
/** A worker role as it appears in its registration subject (`<prefix>.catalog.register.<role>`): the NATS user. */
export const WORKER_ROLE_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

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
    /**
     * A tenant's runs in the fair intake (runs work-queue stream): waiting, one subject per priority (1..5), and
     * `admitted` (a capped tenant's runs allowed to start).
     */
    queuedRuns: (tenant: string, stage: number | 'admitted') => `${prefix}.queued.${tenant}.${stage}`,
    allQueuedRuns: `${prefix}.queued.>`,
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
    /**
     * One worker's own subject for a tool, no queue group: `<prefix>.tool.invoke.<tool>.<token>`. The token starts with
     * an uppercase letter, which no tool name segment does, so it never names another tool, and it stays under the
     * tool's own `tool.invoke.<tool>.>` for subject permissions.
     */
    toolInvokeDirect: (toolName: string, token: string) => {
      assertToolName(toolName);
      if (!WORKER_SUBJECT_TOKEN.test(token))
        throw new AgentMeshError(
          ErrorCode.InvalidRequest,
          `worker subject token "${token}" must match ${WORKER_SUBJECT_TOKEN.source}`,
        );
      return `${prefix}.tool.invoke.${toolName}.${token}`;
    },
    /** Where a worker that turned calls of a tool away says it can take more (`ToolCapacity`). */
    toolCapacity: (toolName: string) => {
      assertToolName(toolName);
      return `${prefix}.tool.capacity.${toolName}`;
    },
    /** Where a worker reports progress of one call to the planner that made it. */
    toolProgress: (runId: string) => `${prefix}.runs.${runId}.progress`,
    catalogRegister: `${prefix}.catalog.register`,
    /**
     * A role's own registration subject. NATS permissions grant each worker user its own, so the catalog knows the
     * role from the subject (never from the body) and holds it to the role's namespaces.
     */
    catalogRegisterAs: (role: string) => {
      if (!WORKER_ROLE_PATTERN.test(role))
        throw new AgentMeshError(
          ErrorCode.InvalidRequest,
          `worker role "${role}" must match ${WORKER_ROLE_PATTERN.source}`,
          { retryable: false, details: { role } },
        );
      return `${prefix}.catalog.register.${role}`;
    },
    allCatalogRegisterRoles: `${prefix}.catalog.register.*`,
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
    /** One tenant's API (see {@link tenantSubjects}). */
    tenant: (tenant: string) => tenantSubjects(prefix, tenant),
  };
}
export type Subjects = ReturnType<typeof subjects>;

/** The queue group every replica of a tool joins, so replicas share calls. */
export function toolQueueGroup(toolName: string): string {
  return `tool.${toolName}`;
}

/**
 * The run id of a per-run subject, `<prefix>.runs.<id>.<verb>` (`cancel`, `input`, `approve`, ...), or undefined
 * when the subject is not one: the inverse of {@link subjects}' `runCancel` and {@link runControlSubjects}.
 */
export function runIdOfSubject(prefix: string, subject: string, verb: string): string | undefined {
  const head = `${prefix}.runs.`;
  const tail = `.${verb}`;
  if (!subject.startsWith(head) || !subject.endsWith(tail)) return undefined;
  const runId = subject.slice(head.length, subject.length - tail.length);
  return runId === '' || runId.includes('.') ? undefined : runId;
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

/** The per-run verbs of the tenant API (`<prefix>.tenant.<tenant>.runs.<run_id>.<verb>`), served by any planner. */
export const TENANT_RUN_VERBS = [
  'approve',
  'input',
  'pause',
  'resume',
  'trigger',
  'cancel',
  'show',
  'history',
] as const;
export type TenantRunVerb = (typeof TENANT_RUN_VERBS)[number];

/** The session verbs of the tenant API (`<prefix>.tenant.<tenant>.sessions.<verb>`, the session id in the body). */
export const TENANT_SESSION_VERBS = ['list', 'show', 'delete', 'fork'] as const;
export type TenantSessionVerb = (typeof TENANT_SESSION_VERBS)[number];

/** The catalog queries a tenant may make (`<prefix>.tenant.<tenant>.catalog.<query>`), relayed to the catalog. */
export const TENANT_CATALOG_QUERIES = ['list', 'search', 'get'] as const;
export type TenantCatalogQuery = (typeof TENANT_CATALOG_QUERIES)[number];

function assertTenantToken(tenant: string): void {
  if (!TENANT_NAME_PATTERN.test(tenant))
    throw new AgentMeshError(
      ErrorCode.InvalidRequest,
      `tenant "${tenant}" must match ${TENANT_NAME_PATTERN.source}`,
      { retryable: false, details: { tenant } },
    );
}

function assertRunToken(runId: string): void {
  if (!RUN_ID_PATTERN.test(runId))
    throw new AgentMeshError(
      ErrorCode.InvalidRequest,
      `run id "${runId}" must match ${RUN_ID_PATTERN.source}`,
      {
        retryable: false,
        details: { run_id: runId },
      },
    );
}

/**
 * The subjects of one tenant's API, `<prefix>.tenant.<tenant>.…`. A tenant's NATS user is granted only these, and
 * the planner takes the tenant from the subject, never from the body (docs/tenancy.md).
 */
export function tenantSubjects(prefix: string, tenant: string) {
  assertTenantToken(tenant);
  const base = `${prefix}.tenant.${tenant}`;
  return {
    tenant,
    /** Everything of this tenant: what its NATS user may publish to. */
    all: `${base}.>`,
    runsSubmit: `${base}.runs.submit`,
    runsList: `${base}.runs.list`,
    runsPending: `${base}.runs.pending`,
    /** The planner mirrors the events of this tenant's runs here (core NATS; `history` answers the stored ones). */
    runEvents: (runId: string) => {
      assertRunToken(runId);
      return `${base}.runs.${runId}.events`;
    },
    allRunEvents: `${base}.runs.*.events`,
    run: (runId: string, verb: TenantRunVerb) => {
      assertRunToken(runId);
      return `${base}.runs.${runId}.${verb}`;
    },
    sessions: (verb: TenantSessionVerb) => `${base}.sessions.${verb}`,
    catalog: (query: TenantCatalogQuery) => `${base}.catalog.${query}`,
  };
}
export type TenantSubjects = ReturnType<typeof tenantSubjects>;

/**
 * Where a client sends a control of a run (`approve`, `input`, `pause`, `resume`, `trigger`): the fleet's
 * `<prefix>.runs.<run_id>.<verb>`, or, with `tenant`, that tenant's API.
 */
export function runControlSubject(
  runId: string,
  verb: Extract<TenantRunVerb, 'approve' | 'input' | 'pause' | 'resume' | 'trigger'>,
  options: { prefix?: string | undefined; tenant?: string | undefined } = {},
): string {
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  if (options.tenant !== undefined) return tenantSubjects(prefix, options.tenant).run(runId, verb);
  return `${prefix}.runs.${runId}.${verb}`;
}

/** The wildcard subjects the planners serve the tenant API on (queue group, any planner answers). */
export function tenantApiSubjects(prefix: string = DEFAULT_PREFIX) {
  const any = `${prefix}.tenant.*`;
  return {
    runsSubmit: `${any}.runs.submit`,
    runsList: `${any}.runs.list`,
    runsPending: `${any}.runs.pending`,
    run: (verb: TenantRunVerb) => `${any}.runs.*.${verb}`,
    sessions: (verb: TenantSessionVerb) => `${any}.sessions.${verb}`,
    catalog: (query: TenantCatalogQuery) => `${any}.catalog.${query}`,
  };
}

/**
 * The tenant of a tenant API subject and the tokens after it (`agentmesh.tenant.acme.runs.r1.approve` →
 * `{ tenant: 'acme', rest: ['runs', 'r1', 'approve'] }`), or undefined when the subject is not one or its tenant
 * token is not a valid tenant name.
 */
export function tenantOfSubject(
  prefix: string,
  subject: string,
): { tenant: string; rest: string[] } | undefined {
  const head = `${prefix}.tenant.`;
  if (!subject.startsWith(head)) return undefined;
  const [tenant, ...rest] = subject.slice(head.length).split('.');
  if (tenant === undefined || !TENANT_NAME_PATTERN.test(tenant) || rest.length === 0) return undefined;
  return { tenant, rest };
}
