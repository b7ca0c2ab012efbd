import { randomUUID } from 'node:crypto';
import {
  AgentMeshError,
  CancelRequestSchema,
  ErrorCode,
  RunRequestSchema,
  TenantHistoryRequestSchema,
  TenantRunsListRequestSchema,
  decodeMessage,
  describeZodError,
  parseJson,
  readEntries,
  type Backend,
  type BusMessage,
  type KvStore,
  type RunEvent,
  type RunRequestInput,
  type TenantHistoryReply,
} from '@agentmesh/protocol';
import { parseRecord, type RunRecord } from '../model/record.js';
import { publishRunRequest } from '../infra/backend.js';
import { cancelRun } from '../infra/run-admin.js';
import { readTranscript } from '../infra/transcripts.js';
import { ownedRecord, tenantOfRecord } from './ownership.js';

/** What the tenant API's run handlers read and write. */
export interface TenantRunDeps {
  bus: Backend;
  prefix: string;
  records: KvStore;
  /** The stored events of a run, in seq order. */
  readEvents: (runId: string) => Promise<RunEvent[]>;
  /** The approvals waiting across the fleet (absent when this planner has no approvals). */
  pendingApprovals?: (() => Promise<{ run_id: string }[]>) | undefined;
  /** Ends a run of `tenant` waiting in its queue (fair intake): true when this call cancelled it. */
  cancelQueued?: ((runId: string, reason: string, tenant: string) => Promise<boolean>) | undefined;
}

/**
 * The RunRequest of `runs.submit` for `tenant`: a body naming another tenant in `identity.tenant` is refused with
 * `permission_denied` naming both; one naming none gets `tenant`. `parent` is the planner's to set (child runs), so a
 * tenant cannot claim to be the child of some run.
 */
export function tenantRequest(tenant: string, msg: BusMessage): RunRequestInput & { id: string } {
  const raw = parseJson(msg.data, 'run request');
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw))
    throw new AgentMeshError(ErrorCode.InvalidRequest, 'invalid run request: (root): expected an object', {
      retryable: false,
    });
  const body = raw as Record<string, unknown>;
  const given = body['identity'] ?? {};
  if (given === null || typeof given !== 'object' || Array.isArray(given))
    throw new AgentMeshError(ErrorCode.InvalidRequest, 'invalid run request: identity: expected an object', {
      retryable: false,
      details: { field: 'identity' },
    });
  const identity = given as Record<string, unknown>;
  const claimed = identity['tenant'];
  if (claimed !== undefined && claimed !== tenant)
    throw new AgentMeshError(
      ErrorCode.PermissionDenied,
      `the run request names tenant "${String(claimed)}" but these credentials are of tenant "${tenant}"`,
      { retryable: false, details: { tenant, claimed_tenant: claimed } },
    );
  if (body['parent'] !== undefined)
    throw new AgentMeshError(
      ErrorCode.InvalidRequest,
      'invalid run request: parent is set by the planner only',
      {
        retryable: false,
        details: { field: 'parent' },
      },
    );
  const stamped = { ...body, id: body['id'] ?? `run-${randomUUID()}`, identity: { ...identity, tenant } };
  const parsed = RunRequestSchema.safeParse(stamped);
  if (!parsed.success)
    throw new AgentMeshError(
      ErrorCode.InvalidRequest,
      `invalid run request: ${describeZodError(parsed.error)}`,
      {
        retryable: false,
      },
    );
  return stamped as RunRequestInput & { id: string };
}

/**
 * `runs.submit`: into the durable intake with the tenant stamped. A run id another tenant used is `conflict` (run
 * ids are one namespace for the fleet: the answer says the id is taken, nothing more).
 */
export async function submitForTenant(deps: TenantRunDeps, tenant: string, msg: BusMessage) {
  const request = tenantRequest(tenant, msg);
  const taken = () =>
    new AgentMeshError(ErrorCode.Conflict, `run id "${request.id}" is taken: submit under another id`, {
      retryable: false,
      details: { run_id: request.id },
    });
  const existing = await deps.records.get(request.id);
  if (existing !== null && tenantOfRecord(parseRecord(existing.value)) !== tenant) throw taken();
  const ack = await publishRunRequest(deps.bus, deps.prefix, request);
  if (ack.duplicate === true) {
    const again = await deps.records.get(request.id);
    if (again !== null && tenantOfRecord(parseRecord(again.value)) !== tenant) throw taken();
  }
  return { ok: true as const, run_id: request.id, ...(ack.duplicate === true ? { duplicate: true } : {}) };
}

/** A record as the tenant API shows it: the lease internals left out. */
function shown(record: RunRecord): Record<string, unknown> {
  const { lease_until: _lease, epoch: _epoch, stream_seq: _seq, ...rest } = record;
  return rest;
}

/** `runs.list`: the tenant's runs, newest first. */
export async function listForTenant(deps: TenantRunDeps, tenant: string, msg: BusMessage) {
  const query =
    msg.data.length === 0 ? {} : decodeMessage(TenantRunsListRequestSchema, msg.data, 'runs list request');
  const runs: RunRecord[] = [];
  for (const entry of await readEntries(deps.records)) {
    const record = parseRecord(entry.value);
    if (tenantOfRecord(record) !== tenant) continue;
    if (query.state === undefined || record.state === query.state) runs.push(record);
  }
  runs.sort((a, b) => b.accepted_at.localeCompare(a.accepted_at) || a.run_id.localeCompare(b.run_id));
  return { runs: runs.slice(0, query.limit ?? 50).map(shown) };
}

/** `runs.<id>.show`: the record and a summary of the transcript. */
export async function showForTenant(deps: TenantRunDeps, tenant: string, runId: string) {
  const record = await ownedRecord(deps.records, runId, tenant);
  const transcript = await readTranscript(deps.bus, runId, { prefix: deps.prefix });
  return {
    record: shown(record),
    transcript:
      transcript === null
        ? null
        : {
            messages: transcript.messages.length,
            events: transcript.events.length,
            ...(transcript.status === undefined ? {} : { status: transcript.status }),
          },
  };
}

/**
 * `runs.<id>.history`: the stored events after `after_seq`, as many as fit in half a message (`more` says there are
 * later ones), so a tenant catches up on a run without JetStream access.
 */
export async function historyForTenant(
  deps: TenantRunDeps,
  tenant: string,
  runId: string,
  msg: BusMessage,
): Promise<TenantHistoryReply> {
  const query =
    msg.data.length === 0 ? {} : decodeMessage(TenantHistoryRequestSchema, msg.data, 'history request');
  await ownedRecord(deps.records, runId, tenant);
  const after = query.after_seq ?? 0;
  const later = (await deps.readEvents(runId)).filter((e) => e.seq > after);
  const budget = Math.floor(deps.bus.maxPayload / 2);
  const events: RunEvent[] = [];
  let bytes = 0;
  for (const event of later) {
    const size = Buffer.byteLength(JSON.stringify(event));
    if (events.length > 0 && bytes + size > budget) break;
    events.push(event);
    bytes += size;
  }
  return { events, last_seq: events.at(-1)?.seq ?? after, more: events.length < later.length };
}

/** `runs.pending`: the approvals waiting in the tenant's runs. */
export async function pendingForTenant(deps: TenantRunDeps, tenant: string) {
  const all = (await deps.pendingApprovals?.()) ?? [];
  const owned = new Map<string, boolean>();
  for (const runId of new Set(all.map((a) => a.run_id))) {
    const entry = await deps.records.get(runId);
    owned.set(runId, entry !== null && tenantOfRecord(parseRecord(entry.value)) === tenant);
  }
  return { pending: all.filter((a) => owned.get(a.run_id) === true) };
}

/**
 * `runs.<id>.cancel`: marks the record and stops the run, as `agentmesh runs cancel` does. A run still waiting in the
 * tenant's queue ends at once (`queued: true`); another tenant's waiting run is `not_found` like any other.
 */
export async function cancelForTenant(deps: TenantRunDeps, tenant: string, runId: string, msg: BusMessage) {
  const body = msg.data.length === 0 ? {} : decodeMessage(CancelRequestSchema, msg.data, 'cancel request');
  const reason = body.reason ?? `cancelled by tenant ${tenant}`;
  if ((await deps.records.get(runId)) === null && (await deps.cancelQueued?.(runId, reason, tenant)) === true)
    return { run_id: runId, state: 'finished', cancelled: true, status: 'cancelled', queued: true };
  await ownedRecord(deps.records, runId, tenant);
  const record = await cancelRun(deps.bus, runId, {
    prefix: deps.prefix,
    reason,
    ...(body.request_id === undefined ? {} : { requestId: body.request_id }),
  });
  if (record === null)
    throw new AgentMeshError(ErrorCode.NotFound, `no run "${runId}" of tenant "${tenant}"`);
  return {
    run_id: runId,
    state: record.state,
    cancelled: record.state !== 'finished',
    ...(record.status === undefined ? {} : { status: record.status }),
  };
}
