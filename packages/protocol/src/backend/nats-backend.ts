import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/nats-core';
import { Objm } from '@nats-io/obj';
import { Svcm } from '@nats-io/services';
import type { Logger } from 'pino';
import { AgentMeshError, ErrorCode } from '../errors.js';
import { INBOX_SUBJECT } from '../subjects.js';
import { retry } from '../retry.js';
import { NatsKvStore, type KvBucketOptions, type KvStore } from '../stores/kv.js';
import { NatsBlobStore, type BlobBucketOptions, type BlobStore } from '../stores/blobs.js';
import { KvLeases } from './kv-leases.js';
import { createRacing, ensureStream, natsFailure } from './nats-assets.js';
import { NatsEventLog } from './nats-event-log.js';
import { NatsWorkQueue } from './nats-queue.js';
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

const ms = (n: number) => n * 1_000_000;
/** How long opening an asset rides out JetStream API timeouts (an R3 asset created or elected on a busy cluster). */
const ASSET_OPEN_TIMEOUT_MS = 30_000;
/**
 * Opens a JetStream asset, trying again while the JetStream API times out or has no responder (a leader election),
 * and logs each wait.
 */
function opening<T>(what: string, logger: Logger | undefined, open: () => Promise<T>): Promise<T> {
  return retry(() => open().catch((error: unknown) => Promise.reject(natsFailure(error))), {
    timeoutMs: ASSET_OPEN_TIMEOUT_MS,
    baseMs: 250,
    capMs: 2_000,
    onRetry: (error, attempt, delayMs) =>
      logger?.warn(
        { asset: what, attempt, retryInMs: delayMs, err: error.message },
        `creating ${what}: ${error.message}, retrying in ${delayMs} ms`,
      ),
  });
}

function createError(asset: string, replicas: number, error: unknown): AgentMeshError {
  const transient = natsFailure(error).retryable;
  return new AgentMeshError(
    transient ? ErrorCode.Unavailable : ErrorCode.InvalidConfig,
    `JetStream asset "${asset}": cannot create or open it with replicas ${replicas}: ${(error as Error).message}`,
    { retryable: transient, cause: error, details: { asset, replicas } },
  );
}

/** What a NATS connection needs to give the backend parts beyond the bus. */
export interface NatsConnectionParts {
  nc: NatsConnection;
  jetstream(): JetStreamClient;
  jetstreamManager(): Promise<JetStreamManager>;
  maxPayload: number;
}

/** The parts of the NATS backend beyond the bus: JetStream streams, KV, object store, service discovery. */
export class NatsBackendParts {
  constructor(
    private readonly conn: NatsConnectionParts,
    readonly replicas: number,
    /** When false (replicas not configured), an existing asset keeps its replica count. */
    private readonly enforceReplicas = true,
    private readonly logger?: Logger,
  ) {}

  /** Replicas above 1 need a JetStream cluster: a single server would accept them and keep one copy. */
  private assertReplicasPossible(asset: string): void {
    if (this.replicas <= 1 || this.conn.nc.info?.cluster !== undefined) return;
    throw new AgentMeshError(
      ErrorCode.InvalidConfig,
      `JetStream asset "${asset}": replicas ${this.replicas} needs a NATS cluster, but the server (${this.conn.nc.getServer()}) is a single node; set AGENTMESH_REPLICAS / nats.replicas to 1 or connect to a cluster`,
      { retryable: false, details: { asset, setting: 'replicas', current: 1, wanted: this.replicas } },
    );
  }

  async kv(bucket: string, options: KvBucketOptions = {}): Promise<KvStore> {
    this.assertReplicasPossible(`KV_${bucket}`);
    return opening(`bucket ${bucket}`, this.logger, () => this.openKv(bucket, options));
  }

  private async openKv(bucket: string, options: KvBucketOptions): Promise<KvStore> {
    const history = options.history ?? 1;
    const kv = await createRacing(
      () => this.conn.jetstreamManager(),
      `KV_${bucket}`,
      () =>
        new Kvm(this.conn.nc).create(bucket, {
          history,
          replicas: this.replicas,
          ...(options.ttlMs ? { ttl: options.ttlMs } : {}),
          ...(options.maxBytes ? { max_bytes: options.maxBytes } : {}),
        }),
    ).catch((error: unknown) => {
      throw createError(`KV_${bucket}`, this.replicas, error);
    });
    const jsm = await this.conn.jetstreamManager();
    await ensureStream(
      jsm,
      {
        name: `KV_${bucket}`,
        num_replicas: this.replicas,
        max_age: ms(options.ttlMs ?? 0),
        max_msgs_per_subject: history,
        ...(options.maxBytes ? { max_bytes: options.maxBytes } : {}),
      },
      { enforceReplicas: this.enforceReplicas },
    );
    const reads = options.consistentReads
      ? await new Kvm(this.conn.nc).open(bucket, { allow_direct: false })
      : kv;
    return new NatsKvStore(kv, jsm, bucket, reads);
  }

  async blobs(bucket: string, options: BlobBucketOptions = {}): Promise<BlobStore> {
    this.assertReplicasPossible(`OBJ_${bucket}`);
    return opening(`object store ${bucket}`, this.logger, () => this.openBlobs(bucket, options));
  }

  private async openBlobs(bucket: string, options: BlobBucketOptions): Promise<BlobStore> {
    const os = await createRacing(
      () => this.conn.jetstreamManager(),
      `OBJ_${bucket}`,
      () =>
        new Objm(this.conn.nc).create(bucket, {
          replicas: this.replicas,
          ...(options.ttlMs ? { ttl: ms(options.ttlMs) } : {}),
        }),
    ).catch((error: unknown) => {
      throw createError(`OBJ_${bucket}`, this.replicas, error);
    });
    await ensureStream(
      await this.conn.jetstreamManager(),
      {
        name: `OBJ_${bucket}`,
        num_replicas: this.replicas,
        max_age: ms(options.ttlMs ?? 0),
      },
      { enforceReplicas: this.enforceReplicas },
    );
    return new NatsBlobStore(os);
  }

  async workQueue(options: WorkQueueOptions): Promise<WorkQueue> {
    this.assertReplicasPossible(options.stream);
    return opening(`stream ${options.stream}`, this.logger, async () =>
      NatsWorkQueue.open(this.conn.jetstream(), await this.conn.jetstreamManager(), {
        ...options,
        replicas: this.replicas,
        enforceReplicas: this.enforceReplicas,
        maxMessageBytes: options.maxMessageBytes ?? this.conn.maxPayload,
      }),
    );
  }

  async eventLog(options: EventLogOptions): Promise<EventLog> {
    this.assertReplicasPossible(options.stream);
    return opening(`stream ${options.stream}`, this.logger, async () =>
      NatsEventLog.open(this.conn.jetstream(), await this.conn.jetstreamManager(), {
        ...options,
        replicas: this.replicas,
        enforceReplicas: this.enforceReplicas,
      }),
    );
  }

  async leases(bucket: string, options: KvBucketOptions = {}): Promise<Leases> {
    return new KvLeases(await this.kv(bucket, options));
  }

  async announce(config: ServiceConfig): Promise<ServiceHandle> {
    const { load, ...info } = config;
    const service = await new Svcm(this.conn.nc).add({
      ...info,
      ...(load === undefined ? {} : { statsHandler: () => Promise.resolve(load()) }),
    });
    if (load !== undefined)
      service.addEndpoint('load', {
        subject: `$SRV.LOAD.${config.name}.${service.info().id}`,
        handler: (_error, msg) =>
          void (INBOX_SUBJECT.test(msg.reply ?? '') && msg.respond(JSON.stringify(load()))),
      });
    return {
      stop: async () => {
        await service.stop().catch(() => undefined);
      },
    };
  }

  async discover(name?: string, timeoutMs = 1000): Promise<DiscoveredService[]> {
    const client = new Svcm(this.conn.nc).client({ strategy: 'timer', maxWait: timeoutMs });
    const out: DiscoveredService[] = [];
    try {
      for await (const s of await client.ping(name))
        out.push({ name: s.name, id: s.id, version: s.version, metadata: s.metadata ?? {} });
    } catch (error) {
      if (!/no responders/i.test((error as Error).message)) throw error;
    }
    return out.sort((a, b) => a.name.localeCompare(b.name) || a.id.localeCompare(b.id));
  }

  async streamFacts(stream: string): Promise<StreamFacts | undefined> {
    const jsm = await this.conn.jetstreamManager();
    const info = await jsm.streams.info(stream).catch((error: unknown) => {
      if (/not found/i.test((error as Error).message)) return undefined;
      throw error;
    });
    if (info === undefined) return undefined;
    return {
      name: stream,
      messages: info.state.messages,
      bytes: info.state.bytes,
      consumers: info.state.consumer_count,
      replicas: info.config.num_replicas,
    };
  }
}
