import {
  AgentMeshError,
  ErrorCode,
  readEntries,
  type Backend,
  type KvEntry,
  type KvStore,
  type KvWatcher,
  type Logger,
} from '@agentmesh/protocol';
import type { WorkerRecord } from './registry.js';

/** How long a registration waits for its own write to come back through the bucket watch. */
const ECHO_TIMEOUT_MS = 5000;

export interface CatalogBucketOptions {
  bus: Backend;
  bucket: string;
  logger: Logger;
  /** Called once per key and revision, newest last (`written`: the record this replica just wrote, unparsed). */
  apply: (entry: KvEntry, written?: WorkerRecord) => void;
}

/**
 * The catalog's KV bucket, mirrored in this replica: loaded at start, watched after, written through. Every entry
 * reaches `apply` once, whether it came from the snapshot, the watch or this replica's own write, and a revision
 * older than the one applied for its key is dropped. Replicas share the bucket, so they converge on one state.
 */
export class CatalogBucket {
  private kv: KvStore | undefined;
  private watcher: KvWatcher | undefined;
  private readonly revisions = new Map<string, number>();
  private watchRevision = 0;
  /** Revisions this replica's own puts were given that the watch has not delivered yet. */
  private readonly ownAhead = new Set<number>();
  private readonly echoWaiters = new Set<{ revision: number; resolve: () => void }>();
  /** Per key, settled once every put of this replica to it has been answered (and its entry applied). */
  private readonly writing = new Map<string, Promise<unknown>>();

  constructor(private readonly options: CatalogBucketOptions) {}

  /** Opens the bucket, then applies its entries: changes made during the load are buffered and applied after it. */
  async open(): Promise<void> {
    const kv = (this.kv = await this.openBucket());
    let buffer: KvEntry[] | undefined = [];
    this.watcher = await kv.watch(
      (entry) => {
        if (buffer !== undefined) buffer.push(entry);
        else this.accept(entry);
        this.watched(entry.revision);
      },
      {
        updatesOnly: true,
        known: (key, revision) => this.known(key, revision),
      },
    );
    for (const entry of await readEntries(kv)) {
      this.accept(entry);
      this.watched(entry.revision);
    }
    const pending = buffer;
    buffer = undefined;
    for (const entry of pending) this.accept(entry);
  }

  stop(): void {
    this.watcher?.stop();
    this.watcher = undefined;
  }

  get(key: string): Promise<KvEntry | null> {
    return this.store.get(key);
  }

  /** Writes a key and applies it at once (`record`: the worker record written, so it is not parsed back). */
  write(key: string, bytes: Uint8Array, record?: WorkerRecord): Promise<number> {
    let put: Promise<number>;
    try {
      put = this.store.put(key, bytes);
    } catch (error) {
      return Promise.reject(error as Error);
    }
    const written = put.then((revision) => {
      this.accept({ key, value: bytes, revision, operation: 'PUT' }, record);
      if (revision > this.watchRevision) {
        this.ownAhead.add(revision);
        this.wakeWaiters();
      }
      return revision;
    });
    const inFlight = Promise.all([this.writing.get(key), written.catch(() => undefined)]);
    this.writing.set(key, inFlight);
    void inFlight.then(() => {
      if (this.writing.get(key) === inFlight) this.writing.delete(key);
    });
    return written;
  }

  /** Deletes a key and applies the deletion at once (the watch later confirms it with the real revision). */
  async remove(key: string): Promise<void> {
    await this.store.delete(key);
    const known = this.revisions.get(key) ?? 0;
    this.accept({ key, value: new Uint8Array(0), revision: known + 0.5, operation: 'DEL' });
  }

  /**
   * Resolves once every write before `revision` (this replica's own put) is applied: at once when each one came
   * through the watch or was a put of this replica, otherwise when the watch delivers `revision` itself.
   */
  async echoOf(revision: number): Promise<void> {
    if (this.appliedBefore(revision)) return;
    await new Promise<void>((resolve) => {
      const waiter = { revision, resolve: () => (clearTimeout(timer), resolve()) };
      const timer = setTimeout(() => {
        this.echoWaiters.delete(waiter);
        this.options.logger.warn(
          { revision },
          'the bucket watch did not deliver our write in time; checking conflicts on the current view',
        );
        resolve();
      }, ECHO_TIMEOUT_MS);
      timer.unref();
      this.echoWaiters.add(waiter);
    });
  }

  /**
   * Whether the watch's entry is applied here already. The watch often hears of this replica's own put before the
   * put's answer arrives: then the answer is awaited (the write applies the entry) rather than the value read back.
   */
  private known(key: string, revision: number): boolean | Promise<boolean> {
    if ((this.revisions.get(key) ?? 0) >= revision) return true;
    return this.writing.get(key)?.then(() => (this.revisions.get(key) ?? 0) >= revision) ?? false;
  }

  private accept(entry: KvEntry, written?: WorkerRecord): void {
    const known = this.revisions.get(entry.key);
    if (known !== undefined && entry.revision <= known) return;
    this.revisions.set(entry.key, entry.revision);
    this.options.apply(entry, written);
  }

  /** Whether every revision below `revision` is applied here: delivered by the watch, or a put of this replica. */
  private appliedBefore(revision: number): boolean {
    let known = this.watchRevision;
    while (known < revision - 1 && this.ownAhead.has(known + 1)) known++;
    return known >= revision - 1;
  }

  private watched(revision: number): void {
    if (revision <= this.watchRevision) return;
    this.watchRevision = revision;
    for (const own of this.ownAhead) if (own <= revision) this.ownAhead.delete(own);
    this.wakeWaiters();
  }

  private wakeWaiters(): void {
    for (const waiter of this.echoWaiters)
      if (this.appliedBefore(waiter.revision)) {
        this.echoWaiters.delete(waiter);
        waiter.resolve();
      }
  }

  private get store(): KvStore {
    if (this.kv === undefined) throw new AgentMeshError(ErrorCode.Unavailable, 'the catalog is not started');
    return this.kv;
  }

  private async openBucket(): Promise<KvStore> {
    const { bus, bucket } = this.options;
    try {
      return await bus.kv(bucket);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (/jetstream/i.test(message) || /503/.test(message))
        throw new AgentMeshError(
          ErrorCode.JetStreamUnavailable,
          `the catalog needs JetStream to keep its state in KV bucket "${bucket}": start nats-server with -js (${message})`,
          { cause: error },
        );
      throw AgentMeshError.from(error, ErrorCode.Unavailable);
    }
  }
}
