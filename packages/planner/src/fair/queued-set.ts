import {
  ErrorCode,
  encodeJson,
  isAgentMeshError,
  parseJson,
  type KvEntry,
  type KvStore,
} from '@agentmesh/protocol';
import { readVersioned, withSchemaVersion } from '../model/versions.js';

const CAS_ATTEMPTS = 50;

interface Waiting {
  runs: string[];
}

function parse(entry: KvEntry | null): string[] {
  if (entry === null || entry.operation !== 'PUT' || entry.value.length === 0) return [];
  const value = readVersioned('waiting runs', parseJson(entry.value, 'waiting runs') as Partial<Waiting>)!;
  return Array.isArray(value.runs) ? value.runs.filter((r): r is string => typeof r === 'string') : [];
}

/**
 * The runs a tenant with `max_queued_runs` has waiting: one KV entry per tenant, changed only by compare-and-set,
 * so planners admitting at the same instant never let the tenant past its bound. A run id is added once (a
 * redelivered submission finds it there) and leaves when the run starts, so nothing is counted twice or leaked.
 */
export class QueuedSet {
  constructor(private readonly kv: () => Promise<KvStore>) {}

  /** Adds `runId` unless `tenant` already has `max` runs waiting: true when it is in the set. */
  add(tenant: string, runId: string, max: number): Promise<boolean> {
    return this.change(tenant, (runs) => {
      if (runs.includes(runId)) return { result: true };
      if (runs.length >= max) return { result: false };
      return { result: true, next: [...runs, runId] };
    });
  }

  /** The run started: it no longer counts as waiting. */
  async remove(tenant: string, runId: string): Promise<void> {
    await this.change(tenant, (runs) =>
      runs.includes(runId) ? { result: true, next: runs.filter((r) => r !== runId) } : { result: true },
    );
  }

  private async change(
    tenant: string,
    decide: (runs: string[]) => { result: boolean; next?: string[] },
  ): Promise<boolean> {
    const kv = await this.kv();
    for (let attempt = 0; ; attempt++) {
      const entry = await kv.get(tenant);
      const { result, next } = decide(parse(entry));
      if (next === undefined) return result;
      const value = encodeJson(withSchemaVersion({ runs: next } satisfies Waiting));
      try {
        if (entry === null) await kv.create(tenant, value);
        else await kv.update(tenant, value, entry.revision);
        return result;
      } catch (error) {
        if (!isAgentMeshError(error, ErrorCode.Conflict) || attempt >= CAS_ATTEMPTS) throw error;
      }
    }
  }
}
