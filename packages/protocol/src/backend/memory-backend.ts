import { randomUUID } from 'node:crypto';
import type { Bus } from '../bus/types.js';
import { MemoryKvStore, type KvBucketOptions, type KvStore } from '../stores/kv.js';
import { MemoryBlobStore, type BlobBucketOptions, type BlobStore } from '../stores/blobs.js';
import { KvLeases } from './kv-leases.js';
import { MemoryEventLog } from './memory-event-log.js';
import { MemoryWorkQueue } from './memory-queue.js';
import type {
  DiscoveredService,
  EventLog,
  EventLogOptions,
  Leases,
  ServiceConfig,
  ServiceHandle,
  StreamFacts,
  WorkQueue,
  WorkQueueOptions,
} from './types.js';

/** Every piece of state of an in-process backend: buckets, blob stores, queues, logs, announced services. */
export class MemoryBackendParts {
  readonly replicas = 1;
  private readonly buckets = new Map<string, MemoryKvStore>();
  private readonly blobStores = new Map<string, MemoryBlobStore>();
  private readonly queues = new Map<string, MemoryWorkQueue>();
  private readonly logs = new Map<string, MemoryEventLog>();
  private readonly services = new Map<string, DiscoveredService>();

  constructor(private readonly bus: Bus) {}

  async kv(bucket: string, options: KvBucketOptions = {}): Promise<KvStore> {
    let store = this.buckets.get(bucket);
    if (store === undefined)
      this.buckets.set(bucket, (store = new MemoryKvStore(options.ttlMs ? { ttlMs: options.ttlMs } : {})));
    return store;
  }

  async blobs(bucket: string, options: BlobBucketOptions = {}): Promise<BlobStore> {
    let store = this.blobStores.get(bucket);
    if (store === undefined) this.blobStores.set(bucket, (store = new MemoryBlobStore(options)));
    return store;
  }

  async workQueue(options: WorkQueueOptions): Promise<WorkQueue> {
    let queue = this.queues.get(options.stream);
    if (queue === undefined)
      this.queues.set(
        options.stream,
        (queue = new MemoryWorkQueue(options.duplicateWindowMs ?? 10 * 60_000, options.subject)),
      );
    return queue;
  }

  async eventLog(options: EventLogOptions): Promise<EventLog> {
    let log = this.logs.get(options.stream);
    if (log === undefined)
      this.logs.set(
        options.stream,
        (log = new MemoryEventLog(this.bus, options.maxAgeMs ?? 7 * 24 * 3_600_000)),
      );
    return log;
  }

  async leases(bucket: string, options: KvBucketOptions = {}): Promise<Leases> {
    return new KvLeases(await this.kv(bucket, options));
  }

  async announce(config: ServiceConfig): Promise<ServiceHandle> {
    const id = randomUUID().replaceAll('-', '').slice(0, 22);
    this.services.set(id, {
      name: config.name,
      id,
      version: config.version,
      metadata: { ...config.metadata },
    });
    return { stop: async () => void this.services.delete(id) };
  }

  async discover(name?: string): Promise<DiscoveredService[]> {
    return [...this.services.values()]
      .filter((s) => name === undefined || s.name === name)
      .sort((a, b) => a.name.localeCompare(b.name) || a.id.localeCompare(b.id));
  }

  async streamFacts(stream: string): Promise<StreamFacts | undefined> {
    const queue = this.queues.get(stream);
    if (queue !== undefined) {
      const { pending, ackPending } = queue.counts('>');
      return { name: stream, messages: pending + ackPending, bytes: 0, consumers: 0, replicas: 1 };
    }
    const log = this.logs.get(stream);
    if (log === undefined) return undefined;
    return { name: stream, messages: 0, bytes: 0, consumers: await log.followerCount(), replicas: 1 };
  }
}
