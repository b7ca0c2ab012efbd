import { AgentMeshError, DEFAULT_TENANT, ErrorCode, type KvStore } from '@agentmesh/protocol';
import { parseRecord, type RunRecord } from '../model/record.js';

/** The tenant a run record belongs to (records of runs that named none: `default`). */
export function tenantOfRecord(record: Pick<RunRecord, 'tenant'>): string {
  return record.tenant ?? DEFAULT_TENANT;
}

/**
 * The same `not_found` for a run id nobody used and for a run of another tenant, so the tenant API is no oracle of
 * which run ids exist.
 */
export function unknownRun(runId: string, tenant: string): AgentMeshError {
  return new AgentMeshError(ErrorCode.NotFound, `no run "${runId}" of tenant "${tenant}"`, {
    retryable: false,
    details: { run_id: runId, tenant },
  });
}

/** The record of `runId` when the run is `tenant`'s; `not_found` otherwise. */
export async function ownedRecord(records: KvStore, runId: string, tenant: string): Promise<RunRecord> {
  const entry = await records.get(runId);
  const record = entry === null ? undefined : parseRecord(entry.value);
  if (record === undefined || tenantOfRecord(record) !== tenant) throw unknownRun(runId, tenant);
  return record;
}
