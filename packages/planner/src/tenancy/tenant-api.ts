import {
  INBOX_SUBJECT,
  ApprovalDecisionSchema,
  ErrorCode,
  AgentMeshError,
  encodeJson,
  TENANT_CATALOG_QUERIES,
  TenantSessionRequestSchema,
  decodeMessage,
  respondError,
  respondJson,
  runControlSubjects,
  subjects as buildSubjects,
  tenantApiSubjects,
  tenantOfSubject,
  type BusMessage,
  type Logger,
  type Subscription,
  type TenantRunVerb,
} from '@agentmesh/protocol';
import { ownedRecord } from './ownership.js';
import {
  cancelForTenant,
  historyForTenant,
  listForTenant,
  pendingForTenant,
  showForTenant,
  submitForTenant,
  type TenantRunDeps,
} from './tenant-runs.js';

/** The session store as the tenant API uses it (every call scoped by tenant). */
export interface TenantSessionStore {
  list(tenant: string): Promise<unknown[]>;
  get(tenant: string, session: string): Promise<unknown>;
  fork(tenant: string, from: string, to: string): Promise<unknown>;
  delete(tenant: string, session: string): Promise<unknown>;
}

export interface TenantApiDeps extends TenantRunDeps {
  logger: Logger;
  sessions: () => Promise<TenantSessionStore>;
  /** How long a relayed request (controls, catalog) waits for its answer. */
  relayTimeoutMs?: number;
}

/** A handler's answer: a JSON value to reply with, or RELAYED when the handler answered itself. */
const RELAYED = Symbol('relayed');
type Handler = (tenant: string, rest: string[], msg: BusMessage) => Promise<unknown>;

const QUEUE = { queue: 'agentmesh-planners' };

/**
 * Serves the tenant API on `<prefix>.tenant.*.…` in the planners' queue group (docs/tenancy.md). The tenant is the
 * subject's token, which NATS lets only that tenant's user publish to; nothing in a body changes it. A run of another
 * tenant is answered exactly like a run id nobody used (`not_found`).
 */
export function serveTenantApi(deps: TenantApiDeps): Subscription[] {
  const api = tenantApiSubjects(deps.prefix);
  const on = (subject: string, what: string, handler: Handler) =>
    deps.bus.subscribe(subject, (msg) => dispatch(deps, what, handler, msg), QUEUE);
  const runVerb = (
    verb: TenantRunVerb,
    handler: (tenant: string, runId: string, msg: BusMessage) => Promise<unknown>,
  ) => on(api.run(verb), `tenant ${verb}`, (tenant, rest, msg) => handler(tenant, rest[1]!, msg));
  const controls = runControlSubjects(deps.prefix);
  const fleet = buildSubjects(deps.prefix);
  const catalog = { list: fleet.catalogList, search: fleet.catalogSearch, get: fleet.catalogGet };
  const relayed = (
    verb: 'approve' | 'input' | 'pause' | 'resume' | 'trigger',
    to: (runId: string) => string,
  ) =>
    runVerb(verb, async (tenant, runId, msg) => {
      await ownedRecord(deps.records, runId, tenant);
      return relay(deps, to(runId), msg, verb === 'approve' ? decidedBy(tenant, msg) : msg.data);
    });
  return [
    on(api.runsSubmit, 'tenant submit', (tenant, _rest, msg) => submitForTenant(deps, tenant, msg)),
    on(api.runsList, 'tenant runs list', (tenant, _rest, msg) => listForTenant(deps, tenant, msg)),
    on(api.runsPending, 'tenant runs pending', (tenant) => pendingForTenant(deps, tenant)),
    runVerb('show', (tenant, runId) => showForTenant(deps, tenant, runId)),
    runVerb('history', (tenant, runId, msg) => historyForTenant(deps, tenant, runId, msg)),
    runVerb('cancel', (tenant, runId, msg) => cancelForTenant(deps, tenant, runId, msg)),
    relayed('approve', controls.approve),
    relayed('input', controls.input),
    relayed('pause', controls.pause),
    relayed('resume', controls.resume),
    relayed('trigger', fleet.runTrigger),
    ...serveTenantSessions(deps, on, api.sessions),
    ...TENANT_CATALOG_QUERIES.map((query) =>
      on(api.catalog(query), `tenant catalog ${query}`, (_tenant, _rest, msg) =>
        relay(deps, catalog[query], msg, msg.data),
      ),
    ),
  ];
}

/** A tenant's decision names the tenant in `by` (what the approval records as its decider). */
function decidedBy(tenant: string, msg: BusMessage): Uint8Array {
  const decision = decodeMessage(ApprovalDecisionSchema, msg.data, 'approval decision');
  return encodeJson({ ...decision, by: `tenant ${tenant}: ${decision.by ?? 'unnamed'}`.slice(0, 256) });
}

function serveTenantSessions(
  deps: TenantApiDeps,
  on: (subject: string, what: string, handler: Handler) => Subscription,
  subject: (verb: 'list' | 'show' | 'delete' | 'fork') => string,
): Subscription[] {
  const named = (msg: BusMessage) => decodeMessage(TenantSessionRequestSchema, msg.data, 'session request');
  return [
    on(subject('list'), 'tenant sessions list', async (tenant) => ({
      sessions: await (await deps.sessions()).list(tenant),
    })),
    on(subject('show'), 'tenant sessions show', async (tenant, _rest, msg) => {
      const { session } = named(msg);
      const record = await (await deps.sessions()).get(tenant, session);
      if (record === undefined)
        throw new AgentMeshError(ErrorCode.NotFound, `no session "${session}" for tenant "${tenant}"`, {
          retryable: false,
          details: { session, tenant },
        });
      return { session: record };
    }),
    on(subject('delete'), 'tenant sessions delete', async (tenant, _rest, msg) => {
      const { session } = named(msg);
      await (await deps.sessions()).delete(tenant, session);
      return { ok: true, deleted: session };
    }),
    on(subject('fork'), 'tenant sessions fork', async (tenant, _rest, msg) => {
      const { session, to } = named(msg);
      if (to === undefined)
        throw new AgentMeshError(ErrorCode.InvalidRequest, 'sessions fork needs "to", the new session id', {
          retryable: false,
          details: { field: 'to' },
        });
      await (await deps.sessions()).fork(tenant, session, to);
      return { ok: true, session: to, from: session };
    }),
  ];
}

async function dispatch(deps: TenantApiDeps, what: string, handler: Handler, msg: BusMessage): Promise<void> {
  const parsed = tenantOfSubject(deps.prefix, msg.subject);
  if (parsed === undefined) return;
  if (msg.reply !== undefined && !INBOX_SUBJECT.test(msg.reply)) {
    deps.logger.warn(
      { tenant: parsed.tenant, subject: msg.subject, reply: msg.reply },
      `${what} refused: its reply subject is not an inbox`,
    );
    return;
  }
  try {
    const reply = await handler(parsed.tenant, parsed.rest, msg);
    if (reply !== RELAYED && msg.reply !== undefined) respondJson(deps.bus, msg, reply);
  } catch (error) {
    deps.logger.warn(
      {
        tenant: parsed.tenant,
        subject: msg.subject,
        code: (error as AgentMeshError).code,
        err: (error as Error).message,
      },
      `${what} refused`,
    );
    if (msg.reply !== undefined) respondError(deps.bus, msg, error);
  }
}

/**
 * Hands a checked request to the fleet's own subject (the same handlers as for trusted clients: the approvals,
 * controls and trigger services, the catalog) and passes their answer back unchanged.
 */
async function relay(
  deps: TenantApiDeps,
  subject: string,
  msg: BusMessage,
  data: Uint8Array,
): Promise<typeof RELAYED> {
  const answer = await deps.bus.request(subject, data, { timeoutMs: deps.relayTimeoutMs ?? 10_000 });
  if (msg.reply !== undefined)
    deps.bus.respond(
      msg,
      answer.data,
      answer.headers === undefined ? undefined : { headers: answer.headers },
    );
  return RELAYED;
}
