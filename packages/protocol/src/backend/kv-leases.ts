import { AgentMeshError, ErrorCode, isAgentMeshError } from '../errors.js';
import type { KvStore } from '../stores/kv.js';
import type { Lease, LeaseClaimResult, Leases } from './types.js';

interface StoredLease {
  owner: string;
  epoch: number;
  until: number;
  released?: boolean;
}

const enc = new TextEncoder();
const dec = new TextDecoder();
const MAX_CONFLICTS = 8;

function lostError(lease: Lease, why: string): AgentMeshError {
  return new AgentMeshError(
    ErrorCode.Conflict,
    `lease "${lease.key}" is no longer held by ${lease.owner}: ${why}`,
    {
      retryable: false,
      details: { key: lease.key, owner: lease.owner, epoch: lease.epoch, lease_lost: true },
    },
  );
}

/**
 * Leases as compare-and-set writes in one KV bucket, the same on every backend: the entry names the holder, its
 * epoch and the time the lease ends. Renewals and releases are updates on the revision the holder last wrote.
 */
export class KvLeases implements Leases {
  /** The revision each held lease was last written at, by key and epoch. */
  private readonly revisions = new Map<string, number>();

  constructor(private readonly kv: KvStore) {}

  async acquire(key: string, owner: string, ttlMs: number): Promise<LeaseClaimResult> {
    for (let conflicts = 0; ; conflicts++) {
      const now = Date.now();
      const entry = await this.kv.get(key);
      const current = entry === null ? undefined : (JSON.parse(dec.decode(entry.value)) as StoredLease);
      if (current !== undefined && !current.released && current.until > now && current.owner !== owner)
        return { acquired: false, holder: current.owner, until: current.until };
      const next: StoredLease = { owner, epoch: (current?.epoch ?? 0) + 1, until: now + ttlMs };
      try {
        const revision =
          entry === null
            ? await this.kv.create(key, enc.encode(JSON.stringify(next)))
            : await this.kv.update(key, enc.encode(JSON.stringify(next)), entry.revision);
        const lease: Lease = { key, owner, epoch: next.epoch, until: next.until };
        this.revisions.set(this.slot(lease), revision);
        return { acquired: true, lease };
      } catch (error) {
        if (!isAgentMeshError(error, ErrorCode.Conflict) || conflicts >= MAX_CONFLICTS) throw error;
      }
    }
  }

  async renew(lease: Lease, ttlMs: number): Promise<Lease> {
    const until = Date.now() + ttlMs;
    await this.write(lease, { owner: lease.owner, epoch: lease.epoch, until });
    return { ...lease, until };
  }

  async release(lease: Lease): Promise<void> {
    await this.write(lease, { owner: lease.owner, epoch: lease.epoch, until: 0, released: true }).catch(
      (error: unknown) => {
        if (!isAgentMeshError(error, ErrorCode.Conflict)) throw error;
      },
    );
    this.revisions.delete(this.slot(lease));
  }

  async holder(key: string): Promise<Lease | undefined> {
    const entry = await this.kv.get(key);
    if (entry === null) return undefined;
    const stored = JSON.parse(dec.decode(entry.value)) as StoredLease;
    if (stored.released || stored.until <= Date.now()) return undefined;
    return { key, owner: stored.owner, epoch: stored.epoch, until: stored.until };
  }

  private async write(lease: Lease, next: StoredLease): Promise<void> {
    const slot = this.slot(lease);
    let revision = this.revisions.get(slot);
    if (revision === undefined) {
      const entry = await this.kv.get(lease.key);
      const stored = entry === null ? undefined : (JSON.parse(dec.decode(entry.value)) as StoredLease);
      if (entry === null || stored?.owner !== lease.owner || stored.epoch !== lease.epoch || stored.released)
        throw lostError(lease, 'another holder or epoch owns it');
      revision = entry.revision;
    }
    try {
      this.revisions.set(slot, await this.kv.update(lease.key, enc.encode(JSON.stringify(next)), revision));
    } catch (error) {
      this.revisions.delete(slot);
      if (isAgentMeshError(error, ErrorCode.Conflict)) throw lostError(lease, 'the lease was taken over');
      throw error;
    }
  }

  private slot(lease: Lease): string {
    return `${lease.key}\u0000${lease.epoch}`;
  }
}
