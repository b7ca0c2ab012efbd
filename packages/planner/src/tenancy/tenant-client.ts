import {
  AgentMeshError,
  DEFAULT_PREFIX,
  ErrorCode,
  RunEventSchema,
  TERMINAL_EVENT_TYPES,
  TenantHistoryReplySchema,
  TenantSubmitReplySchema,
  isAgentMeshError,
  requestJson,
  tenantSubjects,
  validate,
  type Bus,
  type RunEvent,
  type RunRequestInput,
  type TenantHistoryReply,
  type TenantSubmitReply,
} from '@agentmesh/protocol';

/** Submits a run through the tenant API (`tenant.<tenant>.runs.submit`); the planner stamps the tenant. */
export function submitAsTenant(
  bus: Bus,
  tenant: string,
  request: RunRequestInput,
  options: { prefix?: string; timeoutMs?: number } = {},
): Promise<TenantSubmitReply> {
  return requestJson(
    bus,
    tenantSubjects(options.prefix ?? DEFAULT_PREFIX, tenant).runsSubmit,
    request,
    TenantSubmitReplySchema,
    { timeoutMs: options.timeoutMs ?? 10_000 },
  );
}

/** One page of a run's stored events through the tenant API (`runs.<id>.history`). */
export function tenantRunHistory(
  bus: Bus,
  tenant: string,
  runId: string,
  options: { prefix?: string; afterSeq?: number; timeoutMs?: number } = {},
): Promise<TenantHistoryReply> {
  return requestJson(
    bus,
    tenantSubjects(options.prefix ?? DEFAULT_PREFIX, tenant).run(runId, 'history'),
    options.afterSeq === undefined ? {} : { after_seq: options.afterSeq },
    TenantHistoryReplySchema,
    { timeoutMs: options.timeoutMs ?? 10_000 },
  );
}

interface FollowOptions {
  prefix?: string;
  tenant: string;
  onEvent?: ((event: RunEvent) => void) | undefined;
  signal?: AbortSignal | undefined;
  /** How often the stored events are read when no mirrored event came (default 1 s). */
  pollMs?: number;
  /** How long a run id may stay unknown (not accepted yet) before following fails with `not_found` (default 30 s). */
  unknownForMs?: number;
}

/**
 * Hands a tenant's run events to `onEvent` in seq order, each once, until the final event, which it returns: the
 * stored ones first (`history`), then the planner's mirror on `tenant.<tenant>.runs.<id>.events`, reading the stored
 * ones again on a gap or when the mirror is quiet. Needs no JetStream access.
 */
export async function followTenantRun(bus: Bus, runId: string, options: FollowOptions): Promise<RunEvent> {
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  const buffered = new Map<number, RunEvent>();
  let last = 0;
  let final: RunEvent | undefined;
  let wake: () => void = () => undefined;
  const sub = bus.subscribe(tenantSubjects(prefix, options.tenant).runEvents(runId), (msg) => {
    const event = validate(RunEventSchema, JSON.parse(msg.text()), 'run event');
    if (event.seq > last) buffered.set(event.seq, event);
    wake();
  });
  const emit = (event: RunEvent) => {
    buffered.delete(event.seq);
    if (final !== undefined || event.seq <= last) return;
    last = event.seq;
    options.onEvent?.(event);
    if (TERMINAL_EVENT_TYPES.has(event.type)) final = event;
  };
  const unknownUntil = Date.now() + (options.unknownForMs ?? 30_000);
  const onAbort = () => wake();
  options.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    let readStored = true;
    while (final === undefined) {
      if (options.signal?.aborted === true)
        throw new AgentMeshError(ErrorCode.Cancelled, `stopped following run ${runId}`, { retryable: false });
      if (readStored) {
        const page = await storedPage(bus, runId, { prefix, tenant: options.tenant, last, unknownUntil });
        for (const event of page.events) emit(event);
        if (page.more) continue;
      }
      while (buffered.has(last + 1)) emit(buffered.get(last + 1)!);
      if (final !== undefined) break;
      const woke = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), options.pollMs ?? 1_000);
        wake = () => {
          clearTimeout(timer);
          resolve(true);
        };
      });
      while (buffered.has(last + 1)) emit(buffered.get(last + 1)!);
      readStored = !woke || buffered.size > 0;
    }
    return final;
  } finally {
    options.signal?.removeEventListener('abort', onAbort);
    sub.unsubscribe();
  }
}

async function storedPage(
  bus: Bus,
  runId: string,
  at: { prefix: string; tenant: string; last: number; unknownUntil: number },
): Promise<TenantHistoryReply> {
  try {
    return await tenantRunHistory(bus, at.tenant, runId, { prefix: at.prefix, afterSeq: at.last });
  } catch (error) {
    if (!isAgentMeshError(error, ErrorCode.NotFound) || Date.now() > at.unknownUntil) throw error;
    return { events: [], last_seq: at.last, more: false };
  }
}
