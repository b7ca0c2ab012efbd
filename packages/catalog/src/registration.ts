import {
  CatalogRegisterSchema,
  fastValidator,
  isToolName,
  itemCount,
  type CatalogRegister,
  type CatalogRegisterReply,
  type Logger,
} from '@agentmesh/protocol';
import type { CatalogBucket } from './bucket.js';
import type { DeferredIndex } from './deferred-index.js';
import { conflictRejection } from './rejections.js';
import { foreignWorkerError, type RegistrationPolicy } from './role-policy.js';
import { screenRegistration } from './screen.js';
import {
  CatalogKeys,
  encodeRecord,
  type SpecTexts,
  type ToolRegistry,
  type WorkerRecord,
} from './registry.js';

/**
 * Register requests are checked by an ajv validator compiled from the schema once a few dozen tools have been
 * registered (until then, and for a request that fails it or lacks a default, zod checks them and names the offending
 * field): zod copies every one of the specs. A request counts once per tool it carries.
 */
export const checkRegister = fastValidator(
  CatalogRegisterSchema,
  (request) => request.tools.every((spec) => isToolName(spec.name)),
  (request) => 1 + itemCount(request, 'tools'),
);

export interface RegistrarOptions {
  bucket: CatalogBucket;
  registry: ToolRegistry;
  policy: RegistrationPolicy;
  logger: Logger;
  /** The ttl of a worker that asks for none. */
  workerTtlMs: number;
  /** Held while a registration is under way, so the search index catches up after a burst, not inside it. */
  index?: Pick<DeferredIndex, 'hold'>;
}

/** Takes workers' registrations: screens their specs and writes each worker's record to the bucket. */
export class Registrar {
  constructor(private readonly options: RegistrarOptions) {}

  /**
   * Registers the worker's tools: one KV write of its record. A spec that differs from the one another live worker
   * serves under the same name and version is rejected, naming both workers. Two replicas racing on conflicting
   * specs settle it the same way everywhere: the earlier record revision wins, and the later registration, once every
   * revision before its own is applied here (see {@link CatalogBucket.echoOf}), drops the losing tools from its record
   * and reports them rejected.
   */
  async register(
    request: CatalogRegister,
    role: string | undefined,
    namespaces: readonly string[] | undefined,
  ): Promise<CatalogRegisterReply> {
    const release = this.options.index?.hold();
    try {
      return await this.registerHeld(request, role, namespaces);
    } finally {
      release?.();
    }
  }

  private async registerHeld(
    request: CatalogRegister,
    role: string | undefined,
    namespaces: readonly string[] | undefined,
  ): Promise<CatalogRegisterReply> {
    const { registry, policy, bucket } = this.options;
    const workerId = request.worker_id;
    const owner = registry.worker(workerId);
    if (policy.scoped && owner !== undefined && owner.role !== role)
      throw foreignWorkerError(workerId, role, owner.role);
    const ttlMs = request.ttl_ms ?? this.options.workerTtlMs;
    const { accepted, rejected, texts } = screenRegistration(request, role, namespaces, registry);
    const key = CatalogKeys.worker(workerId);
    let record: WorkerRecord = {
      worker_id: workerId,
      ttl_ms: ttlMs,
      registered_at: owner?.registered_at ?? new Date().toISOString(),
      ...(role === undefined ? {} : { role }),
      tools: accepted,
    };
    const written = this.write(key, record, texts);
    // the texts are in the record's bytes now: dropped before the round trip rather than carried across it
    texts.clear();
    let revision = await written;
    await bucket.echoOf(revision);
    const lost = new Set<string>();
    for (const { hash, spec } of record.tools) {
      const conflict = registry.conflicts(spec.name, spec.version, hash, workerId);
      if (conflict === undefined) continue;
      lost.add(hash);
      rejected.push(conflictRejection(spec, hash, workerId, conflict.workers, conflict.hash));
    }
    if (lost.size > 0) {
      record = { ...record, tools: record.tools.filter((t) => !lost.has(t.hash)) };
      revision = await this.write(key, record, texts);
    }
    this.log(workerId, record.tools.length, rejected);
    return { accepted: record.tools.map((t) => t.spec.name), rejected, ttl_ms: ttlMs };
  }

  /**
   * Writes a worker record, its specs copied from the canonical JSON bytes their hashes were computed from (a spec
   * missing from `texts` is written again); the record is encoded before this returns.
   */
  private write(key: string, record: WorkerRecord, texts: SpecTexts): Promise<number> {
    return this.options.bucket.write(key, encodeRecord(record, texts), record);
  }

  private log(workerId: string, accepted: number, rejected: CatalogRegisterReply['rejected']): void {
    for (const r of rejected)
      this.options.logger.warn(
        { worker_id: workerId, tool: r.name, code: r.error.code, err: r.error.message },
        'tool registration rejected',
      );
    this.options.logger.info(
      { worker_id: workerId, accepted, rejected: rejected.length },
      'worker registered',
    );
  }
}
