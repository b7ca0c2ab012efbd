import {
  backoffDelay,
  encodeJson,
  ErrorCode,
  isAgentMeshError,
  sleep,
  type KvStore,
  type Logger,
} from '@agentmesh/protocol';
import type { RunSnapshot } from '../model/snapshot.js';
import { leaseLostError, type RunLease } from './lease.js';
import { SCHEMA_VERSION } from '../model/versions.js';

const dec = new TextDecoder();

/** A checkpoint as stored: the snapshot and which ownership epoch wrote it. */
export interface StoredCheckpoint {
  /** The record's format (absent: 1); a planner leaves a run whose checkpoint is newer than it understands. */
  schema_version?: number;
  version: 1;
  planner_id: string;
  epoch: number;
  saved_at: string;
  snapshot: RunSnapshot;
}

/**
 * Writes a run's checkpoints to KV, one key per run, as compare-and-set writes stamped with the lease epoch. Writes
 * are serialized and coalesced (a write that finds a newer state queued writes that one); a write that finds another
 * epoch's checkpoint means the run was taken over, and fails with the lease-lost error.
 */
export class CheckpointWriter {
  private chain: Promise<void> = Promise.resolve();
  private version = 0;
  private written = 0;
  /** False while no checkpoint of the run can be stored: none was found, none written, no earlier owner. */
  private mayBeStored: boolean;

  constructor(
    private readonly store: KvStore,
    private readonly lease: RunLease,
    private revision: number | undefined,
    private readonly log: Logger,
  ) {
    this.mayBeStored = revision !== undefined || lease.epoch > 1;
  }

  /** Resolves once a checkpoint at least as new as `snapshot` now is stored. */
  write(snapshot: Readonly<RunSnapshot>): Promise<void> {
    const version = ++this.version;
    const next = this.chain.then(() =>
      this.written >= version ? undefined : this.flush(snapshot, this.version),
    );
    this.chain = next.catch(() => undefined);
    return next;
  }

  private async flush(snapshot: Readonly<RunSnapshot>, version: number): Promise<void> {
    const runId = snapshot.run_id;
    const body: StoredCheckpoint = {
      schema_version: SCHEMA_VERSION,
      version: 1,
      planner_id: this.lease.plannerId,
      epoch: this.lease.epoch,
      saved_at: new Date().toISOString(),
      snapshot: snapshot as RunSnapshot,
    };
    const data = encodeJson(body);
    this.mayBeStored = true;
    for (let attempt = 1; ; attempt++) {
      this.lease.assertOwned();
      try {
        this.revision =
          this.revision === undefined
            ? await this.store.create(runId, data)
            : await this.store.update(runId, data, this.revision);
        this.written = version;
        return;
      } catch (error) {
        if (isAgentMeshError(error, ErrorCode.Conflict)) {
          const entry = await this.store.get(runId).catch(() => undefined);
          if (entry === undefined) continue;
          const stored =
            entry === null ? undefined : (JSON.parse(dec.decode(entry.value)) as StoredCheckpoint);
          if (
            entry !== null &&
            stored?.epoch === this.lease.epoch &&
            stored.planner_id === this.lease.plannerId
          ) {
            this.revision = entry.revision;
            continue;
          }
          if (entry === null) {
            this.revision = undefined;
            continue;
          }
          const why = `a checkpoint of epoch ${stored?.epoch ?? '?'} was written by ${stored?.planner_id ?? '?'}`;
          this.lease.markLost(why);
          throw leaseLostError(runId, why);
        }
        this.log.debug(
          { run_id: runId, attempt, err: (error as Error).message },
          'checkpoint write failed; retrying',
        );
        await sleep(backoffDelay(attempt, { baseMs: 100, capMs: 1_000 }));
      }
    }
  }

  /**
   * Removes the checkpoint of a finished run. A run that never had one (it ended before its first checkpoint, on the
   * planner that created its record) writes nothing: a delete would store a marker for the bucket's TTL.
   */
  async clear(runId: string): Promise<void> {
    await this.chain;
    if (!this.mayBeStored) return;
    await this.store.delete(runId).catch(() => undefined);
  }
}

/** Reads a run's stored checkpoint and its KV revision, or undefined. */
export async function readCheckpoint(
  store: KvStore,
  runId: string,
): Promise<{ checkpoint: StoredCheckpoint; revision: number } | undefined> {
  const entry = await store.get(runId);
  if (entry === null) return undefined;
  return { checkpoint: JSON.parse(dec.decode(entry.value)) as StoredCheckpoint, revision: entry.revision };
}
