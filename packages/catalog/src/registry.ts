import { AgentMeshError, ErrorCode, parseJson, type ToolSpec } from '@agentmesh/protocol';
import { CanonicalBytes } from './canonical-bytes.js';
import { SpecTexts } from './spec-texts.js';

export { canonicalJson, hashCanonical } from './canonical.js';
export { specCanonicalJson, specHash } from './canonical-bytes.js';
export { SpecTexts } from './spec-texts.js';

/** What the catalog keeps per worker in the KV bucket (`workers.<id>`): the worker and the specs it serves. */
export interface WorkerRecord {
  worker_id: string;
  ttl_ms: number;
  registered_at: string;
  /** The role whose registration subject the record came on (absent: the unscoped subject). */
  role?: string;
  /** `since`: the revision of the record that first claimed this exact spec, kept across re-registrations. */
  tools: { hash: string; spec: ToolSpec; since?: number }[];
}

/** A tool as the catalog serves it: the newest live version and the workers serving exactly that spec. */
export interface LiveTool {
  spec: ToolSpec;
  hash: string;
  workers: string[];
}

/** Another worker's claim on the same name and version with a different spec. */
export interface SpecConflict {
  hash: string;
  workers: string[];
}

const versionCollator = new Intl.Collator('en', { numeric: true, sensitivity: 'base' });

/** Orders versions numerically where they are numbers (`1.10` after `1.9`, `2` after `1`). */
export function compareVersions(a: string, b: string): number {
  if (a === b) return 0;
  return versionCollator.compare(a, b) || (a < b ? -1 : 1);
}

const toB64 = (s: string) => Buffer.from(s, 'utf8').toString('base64url');

/** KV keys: `workers.<worker id, base64url>` (registration) and `beats.<worker id, base64url>` (heartbeats). */
export const CatalogKeys = {
  worker: (workerId: string) => `workers.${toB64(workerId)}`,
  /**
   * A worker's heartbeat key, as catalogs wrote it before heartbeats were batched (`pulses.*`, see pulses.ts): still
   * read, so replicas of both versions agree while a deployment rolls, and deleted with the worker.
   */
  beat: (workerId: string) => `beats.${toB64(workerId)}`,
  isWorker: (key: string) => key.startsWith('workers.'),
  isBeat: (key: string) => key.startsWith('beats.'),
  workerOfBeat: (key: string) => Buffer.from(key.slice('beats.'.length), 'base64url').toString('utf8'),
} as const;

interface Claim {
  hash: string;
  /** KV revision of the worker record: when two workers claim one name and version with different specs, the
   * earlier revision wins on every replica alike. */
  revision: number;
}

/**
 * The catalog's view of the KV bucket: workers, the specs they serve, and from those the live tools. Pure
 * bookkeeping; every change reports the tool names whose live state may have changed. Equal specs are stored once.
 */
export class ToolRegistry {
  private readonly workers = new Map<string, { record: WorkerRecord; revision: number }>();
  private readonly workerByKey = new Map<string, string>();
  /** name -> version -> worker id -> claim */
  private readonly claims = new Map<string, Map<string, Map<string, Claim>>>();
  private readonly specs = new Map<string, { spec: ToolSpec; refs: number }>();

  /** Applies a worker key change (record absent = deleted); returns the affected tool names. */
  setWorker(key: string, record: WorkerRecord | undefined, revision: number): string[] {
    const affected = new Set<string>();
    const previousId = this.workerByKey.get(key);
    const previous = previousId === undefined ? undefined : this.workers.get(previousId);
    if (previous !== undefined) {
      for (const { hash, spec } of previous.record.tools) {
        const versions = this.claims.get(spec.name);
        const byWorker = versions?.get(spec.version);
        byWorker?.delete(previous.record.worker_id);
        if (byWorker?.size === 0) versions!.delete(spec.version);
        if (versions?.size === 0) this.claims.delete(spec.name);
        this.release(hash);
        affected.add(spec.name);
      }
      this.workers.delete(previous.record.worker_id);
      this.workerByKey.delete(key);
    }
    if (record !== undefined) {
      const tools = record.tools.map(({ hash, spec, since }) =>
        since === undefined
          ? { hash, spec: this.retain(hash, spec) }
          : { hash, spec: this.retain(hash, spec), since },
      );
      const stored = { ...record, tools };
      this.workers.set(record.worker_id, { record: stored, revision });
      this.workerByKey.set(key, record.worker_id);
      for (const { hash, spec, since } of tools) {
        let versions = this.claims.get(spec.name);
        if (versions === undefined) this.claims.set(spec.name, (versions = new Map()));
        let byWorker = versions.get(spec.version);
        if (byWorker === undefined) versions.set(spec.version, (byWorker = new Map()));
        byWorker.set(record.worker_id, { hash, revision: since ?? revision });
        affected.add(spec.name);
      }
    }
    return [...affected];
  }

  private retain(hash: string, spec: ToolSpec): ToolSpec {
    const entry = this.specs.get(hash);
    if (entry !== undefined) {
      entry.refs++;
      return entry.spec;
    }
    this.specs.set(hash, { spec, refs: 1 });
    return spec;
  }

  private release(hash: string): void {
    const entry = this.specs.get(hash);
    if (entry !== undefined && --entry.refs === 0) this.specs.delete(hash);
  }

  worker(workerId: string): WorkerRecord | undefined {
    return this.workers.get(workerId)?.record;
  }

  /** The revision at which `workerId` first claimed exactly this spec, if it still does. */
  claimedSince(workerId: string, name: string, version: string, hash: string): number | undefined {
    const claim = this.claims.get(name)?.get(version)?.get(workerId);
    return claim?.hash === hash ? claim.revision : undefined;
  }

  *allWorkers(): IterableIterator<WorkerRecord> {
    for (const { record } of this.workers.values()) yield record;
  }

  /** The spec that serves (name, version): the one claimed by the earliest worker record; undefined if none. */
  winner(name: string, version: string): { hash: string; workers: string[] } | undefined {
    const byWorker = this.claims.get(name)?.get(version);
    if (byWorker === undefined || byWorker.size === 0) return undefined;
    let first: Claim | undefined;
    for (const claim of byWorker.values())
      if (first === undefined || claim.revision < first.revision) first = claim;
    const workers: string[] = [];
    for (const [id, claim] of byWorker) if (claim.hash === first!.hash) workers.push(id);
    return { hash: first!.hash, workers: workers.sort() };
  }

  /** Other workers serving (name, version) with a spec other than `hash`, grouped by their spec. */
  conflicts(name: string, version: string, hash: string, workerId: string): SpecConflict | undefined {
    const byWorker = this.claims.get(name)?.get(version);
    if (byWorker === undefined || (byWorker.size === 1 && byWorker.has(workerId))) return undefined;
    const win = this.winner(name, version);
    if (win === undefined || win.hash === hash) return undefined;
    const workers = win.workers.filter((w) => w !== workerId);
    return workers.length === 0 ? undefined : { hash: win.hash, workers };
  }

  spec(hash: string): ToolSpec | undefined {
    return this.specs.get(hash)?.spec;
  }

  /** Every live version of `name`, oldest first (a rollout shows two). */
  liveVersions(name: string): LiveTool[] {
    const versions = this.claims.get(name);
    if (versions === undefined) return [];
    const out: LiveTool[] = [];
    for (const version of versions.keys()) {
      const win = this.winner(name, version);
      const spec = win === undefined ? undefined : this.spec(win.hash);
      if (win !== undefined && spec !== undefined) out.push({ spec, hash: win.hash, workers: win.workers });
    }
    return out.sort((a, b) => compareVersions(a.spec.version, b.spec.version));
  }

  /** The newest live version of `name`. */
  live(name: string): LiveTool | undefined {
    const versions = this.claims.get(name);
    if (versions === undefined) return undefined;
    let newest: LiveTool | undefined;
    for (const version of versions.keys()) {
      if (newest !== undefined && compareVersions(version, newest.spec.version) <= 0) continue;
      const win = this.winner(name, version);
      const spec = win === undefined ? undefined : this.spec(win.hash);
      if (win !== undefined && spec !== undefined) newest = { spec, hash: win.hash, workers: win.workers };
    }
    return newest;
  }
}

/**
 * The record as JSON bytes, each spec's canonical JSON copied from `texts` (the bytes its hash was computed from) or,
 * for a spec missing there, written again; no spec is stringified twice.
 */
export function encodeRecord(record: WorkerRecord, texts: SpecTexts = new SpecTexts()): Uint8Array {
  const head = JSON.stringify({
    worker_id: record.worker_id,
    ttl_ms: record.ttl_ms,
    registered_at: record.registered_at,
    ...(record.role === undefined ? {} : { role: record.role }),
  });
  const out = new CanonicalBytes(3 * head.length + texts.size + 128 * record.tools.length + 64);
  out.utf8(head.slice(0, -1));
  out.ascii(',"tools":[');
  record.tools.forEach(({ hash, spec, since }, i) => {
    out.ascii(i === 0 ? '{"hash":' : ',{"hash":');
    out.string(hash);
    out.ascii(',"spec":');
    texts.writeTo(out, hash, spec);
    if (since !== undefined) {
      out.ascii(',"since":');
      out.value(since);
    }
    out.ascii('}');
  });
  out.ascii(']}');
  return out.view(0, out.length);
}

/** Checks the shape a catalog wrote (specs were validated when registered; this guards against foreign writes). */
export function parseWorkerRecord(value: Uint8Array): WorkerRecord {
  const record = parseJson(value, 'worker record') as Partial<WorkerRecord> | null;
  const ok =
    typeof record?.worker_id === 'string' &&
    typeof record.ttl_ms === 'number' &&
    Array.isArray(record.tools) &&
    record.tools.every(
      (t) =>
        typeof t?.hash === 'string' && typeof t.spec?.name === 'string' && typeof t.spec.version === 'string',
    );
  if (!ok)
    throw new AgentMeshError(
      ErrorCode.InvalidMessage,
      'worker record lacks worker_id, ttl_ms or tools[].hash/spec',
    );
  return record as WorkerRecord;
}
