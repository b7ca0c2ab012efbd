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

/** Made at the first two versions compared: an ICU collator takes milliseconds to make, most processes need none. */
let versionCollator: Intl.Collator | undefined;

/** Orders versions numerically where they are numbers (`1.10` after `1.9`, `2` after `1`). */
export function compareVersions(a: string, b: string): number {
  if (a === b) return 0;
  versionCollator ??= new Intl.Collator('en', { numeric: true, sensitivity: 'base' });
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
  version: string;
  worker: string;
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
  /**
   * name -> its claims, one per worker and version. A flat list rather than maps by version and worker: nearly every
   * name has one or a few claims, and 10,000 names registered at once cost 20,000 maps that way.
   */
  private readonly claims = new Map<string, Claim[]>();
  private readonly specs = new Map<string, { spec: ToolSpec; refs: number }>();

  /** Applies a worker key change (record absent = deleted); returns the affected tool names. */
  setWorker(key: string, record: WorkerRecord | undefined, revision: number): ReadonlySet<string> {
    const affected = new Set<string>();
    const previousId = this.workerByKey.get(key);
    const previous = previousId === undefined ? undefined : this.workers.get(previousId);
    if (previous !== undefined) {
      const worker = previous.record.worker_id;
      for (const { hash, spec } of previous.record.tools) {
        this.unclaim(spec.name, spec.version, worker);
        this.release(hash);
        affected.add(spec.name);
      }
      this.workers.delete(worker);
      this.workerByKey.delete(key);
    }
    if (record !== undefined) {
      const worker = record.worker_id;
      // a tool whose spec is the one kept for its hash (a first claim) is kept as it came, not copied
      let copied = false;
      const tools = record.tools.map((tool) => {
        const { hash, spec, since } = tool;
        const kept = this.retain(hash, spec);
        if (kept === spec) return tool;
        copied = true;
        return since === undefined ? { hash, spec: kept } : { hash, spec: kept, since };
      });
      this.workers.set(worker, { record: copied ? { ...record, tools } : record, revision });
      this.workerByKey.set(key, worker);
      for (const { hash, spec, since } of tools) {
        this.claim({ version: spec.version, worker, hash, revision: since ?? revision }, spec.name);
        affected.add(spec.name);
      }
    }
    return affected;
  }

  /** Adds a claim on `name`, in place of the worker's claim on the same version if it had one. */
  private claim(claim: Claim, name: string): void {
    const list = this.claims.get(name);
    if (list === undefined) {
      this.claims.set(name, [claim]);
      return;
    }
    const at = list.findIndex((c) => c.worker === claim.worker && c.version === claim.version);
    if (at >= 0) list.splice(at, 1);
    list.push(claim);
  }

  private unclaim(name: string, version: string, worker: string): void {
    const list = this.claims.get(name);
    if (list === undefined) return;
    const at = list.findIndex((c) => c.worker === worker && c.version === version);
    if (at >= 0) list.splice(at, 1);
    if (list.length === 0) this.claims.delete(name);
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
    const list = this.claims.get(name);
    if (list === undefined) return undefined;
    for (const claim of list)
      if (claim.worker === workerId && claim.version === version)
        return claim.hash === hash ? claim.revision : undefined;
    return undefined;
  }

  *allWorkers(): IterableIterator<WorkerRecord> {
    for (const { record } of this.workers.values()) yield record;
  }

  /** The spec that serves (name, version): the one claimed by the earliest worker record; undefined if none. */
  winner(name: string, version: string): { hash: string; workers: string[] } | undefined {
    const list = this.claims.get(name);
    if (list === undefined) return undefined;
    let first: Claim | undefined;
    for (const claim of list)
      if (claim.version === version && (first === undefined || claim.revision < first.revision))
        first = claim;
    if (first === undefined) return undefined;
    const workers: string[] = [];
    for (const claim of list)
      if (claim.version === version && claim.hash === first.hash) workers.push(claim.worker);
    return { hash: first.hash, workers: workers.length > 1 ? workers.sort() : workers };
  }

  /** Other workers serving (name, version) with a spec other than `hash`, grouped by their spec. */
  conflicts(name: string, version: string, hash: string, workerId: string): SpecConflict | undefined {
    const list = this.claims.get(name);
    if (list === undefined || !list.some((c) => c.version === version && c.worker !== workerId))
      return undefined;
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
    const list = this.claims.get(name);
    if (list === undefined) return [];
    const out: LiveTool[] = [];
    const seen: string[] = [];
    for (const { version } of list) {
      if (seen.includes(version)) continue;
      seen.push(version);
      const tool = this.liveVersion(name, version);
      if (tool !== undefined) out.push(tool);
    }
    return out.length > 1 ? out.sort((a, b) => compareVersions(a.spec.version, b.spec.version)) : out;
  }

  /** The newest live version of `name`. */
  live(name: string): LiveTool | undefined {
    const list = this.claims.get(name);
    if (list === undefined) return undefined;
    let newest: LiveTool | undefined;
    for (const { version } of list) {
      if (newest !== undefined && compareVersions(version, newest.spec.version) <= 0) continue;
      newest = this.liveVersion(name, version) ?? newest;
    }
    return newest;
  }

  private liveVersion(name: string, version: string): LiveTool | undefined {
    const win = this.winner(name, version);
    const spec = win === undefined ? undefined : this.spec(win.hash);
    return win === undefined || spec === undefined
      ? undefined
      : { spec, hash: win.hash, workers: win.workers };
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
