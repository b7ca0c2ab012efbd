import type { Bus, BusHeaders } from '../bus/types.js';
import type { KvBucketOptions, KvStore } from '../stores/kv.js';
import type { BlobBucketOptions, BlobStore } from '../stores/blobs.js';

/** Settings every persistent asset (stream, KV bucket, object store) of a backend is created or updated with. */
export interface AssetOptions {
  /**
   * Copies JetStream keeps of each asset (1 on one server, 3 on a cluster). Given, it is enforced: an existing asset
   * with another count is updated. Left out, a new asset gets 1 and an existing one keeps its count, so a client
   * that did not say (a CLI, a test) never scales a cluster's R3 assets down.
   */
  replicas?: number;
}

/** The durable run intake: a work queue where each message goes to one consumer and stays until acked. */
export interface WorkQueueOptions {
  /** The queue's name (the JetStream stream on NATS). */
  stream: string;
  /** The subject messages are submitted on. */
  subject: string;
  /** A message submitted again with the same dedupe id within this window is dropped (default 10 minutes). */
  duplicateWindowMs?: number;
  /** The largest message, in bytes (default: the bus's max payload). */
  maxMessageBytes?: number;
  /** More subjects the queue holds (wildcards allowed), read by consumers filtered to them. */
  moreSubjects?: string[];
}

export interface WorkQueue {
  /** Adds a message; a repeat of `dedupeId` inside the duplicate window is reported as `duplicate`, not added. */
  submit(
    data: Uint8Array,
    options: { dedupeId: string; headers?: BusHeaders; timeoutMs?: number; subject?: string },
  ): Promise<{ seq: number; duplicate: boolean }>;
  /**
   * The durable consumer `name`, shared by every process that opens it (created when missing). It reads the
   * submit subject, or `filterSubject` (one of `moreSubjects`). With `maxAckPending`, at most that many of its
   * messages are delivered and not yet acked at once, across every process (the queue enforces it).
   */
  consumer(name: string, options: WorkConsumerOptions): Promise<WorkConsumer>;
  /** The consumers of this queue and their counts (for `agentmesh status`). */
  consumers(): Promise<WorkConsumerFacts[]>;
  /**
   * Deletes the first message on `subject` (one subject, no wildcard) from stream sequence `fromSeq` on that
   * `matches`, looking at `maxLooks` messages of that subject at most: true when one was deleted. A message that
   * does not match is never deleted; the consumers reading the subject stop counting the deleted one at once.
   */
  remove(subject: string, options: WorkRemoval): Promise<boolean>;
}

/** Which message {@link WorkQueue.remove} deletes. */
export interface WorkRemoval {
  fromSeq: number;
  matches: (message: { seq: number; data: Uint8Array; headers: BusHeaders | undefined }) => boolean;
  maxLooks: number;
}

export interface WorkConsumerOptions {
  ackWaitMs: number;
  filterSubject?: string;
  /** Unlimited when absent or 0. */
  maxAckPending?: number;
}

export interface WorkConsumerFacts {
  name: string;
  pending: number;
  ackPending: number;
  redelivered: number;
}

export interface WorkConsumer {
  /**
   * The next message for this consumer, or undefined when none came within `expiresMs` or `signal` aborted. A
   * message not acked within `ackWaitMs` (or nak'ed) is delivered again, to this or another process.
   */
  next(options: { expiresMs: number; signal?: AbortSignal }): Promise<WorkItem | undefined>;
  /**
   * A pull that stays open across messages, for one taker that asks for them one at a time: the queue is asked for
   * one message when the pull starts and again at each {@link WorkPull.next} after the first, never for more, so
   * a taker that stops calling `next` holds no message it did not ask for (a pull the queue did not answer within
   * `expiresMs` is renewed inside). It ends when `signal` aborts, as {@link WorkPull.stop}.
   */
  pull(options: { expiresMs: number; signal?: AbortSignal }): Promise<WorkPull>;
  /** Messages not yet delivered (`pending`) and delivered but not yet acked (`ackPending`). */
  counts(): Promise<{ pending: number; ackPending: number }>;
}

/** A pull that stays open across messages: see {@link WorkConsumer.pull}. */
export interface WorkPull {
  /**
   * The next message, waiting for one as long as it takes; undefined once the pull is stopped. Rejects when the pull
   * ended another way (connection closed, consumer deleted, no permission): a new pull may then be started.
   */
  next(): Promise<WorkItem | undefined>;
  /**
   * Stops the pull: the queue is asked for nothing more, a `next` waiting now resolves undefined, and a message the
   * queue sent before it saw the stop is given back at once (nak, no delay) for another taker.
   */
  stop(): void;
}

export interface WorkItem {
  /** The message's position in the queue (stable across redeliveries). */
  readonly seq: number;
  readonly data: Uint8Array;
  readonly headers: BusHeaders | undefined;
  /** 1 on the first delivery, more on redeliveries. */
  readonly deliveries: number;
  text(): string;
  /** Done: the message leaves the queue (resolves once the queue confirmed it). */
  ack(): Promise<void>;
  /** Not now: deliver again after `delayMs` (default at once). */
  nak(delayMs?: number): void;
  /** Never: the message leaves the queue without being done. */
  term(): void;
  /** Still working: restarts the ack wait. */
  working(): void;
}

/** An append-only log of events per key (a run): seqs 1..N with no gap and no duplicate, replayable. */
export interface EventLogOptions {
  /** The log's name (the JetStream stream on NATS). */
  stream: string;
  /** The subject pattern the log captures (e.g. `agentmesh.runs.*.events`); each key is one subject of it. */
  subjects: string;
  /** How long events are kept (default 7 days). */
  maxAgeMs?: number;
}

export interface LoggedEvent {
  seq: number;
  data: Uint8Array;
}

export interface EventLog {
  /**
   * Appends event `seq` to the subject's log, also publishing it to live subscribers of the subject. The log must
   * hold exactly seqs 1..seq-1 before: appending a seq that is already stored with the same position is a no-op
   * (a retried append), anything else fails with `conflict`.
   */
  append(subject: string, seq: number, data: Uint8Array, options?: { headers?: BusHeaders }): Promise<void>;
  /** Every stored event of the subject with seq >= `fromSeq` (default 1), in order. */
  replay(subject: string, options?: { fromSeq?: number; signal?: AbortSignal }): Promise<LoggedEvent[]>;
  /** The last stored event of the subject, or undefined. */
  last(subject: string): Promise<LoggedEvent | undefined>;
  /**
   * Delivers the stored events with seq >= `fromSeq`, then live ones as they are appended, in order and each once
   * (a reconnect resumes after the last seen one). `stop()` ends delivery and releases server-side state.
   */
  follow(
    subject: string,
    onEvent: (event: LoggedEvent) => void,
    options?: { fromSeq?: number },
  ): Promise<EventFollower>;
  /** Followers currently open on this log, across every process (a leak check). */
  followerCount(): Promise<number>;
}

export interface EventFollower {
  stop(): Promise<void>;
}

/** A held lease: `epoch` grows with every new holder, so a write stamped with an old epoch can be refused. */
export interface Lease {
  readonly key: string;
  readonly owner: string;
  readonly epoch: number;
  /** Epoch ms until which the lease holds without a renewal. */
  readonly until: number;
}

export type LeaseClaimResult =
  { acquired: true; lease: Lease } | { acquired: false; holder: string; until: number };

/**
 * Leases on keys (e.g. run ownership), built on compare-and-set writes: of two claimants only one holds a key, and
 * a holder that lost its lease (expired and taken, or released) can never renew or write with it again.
 */
export interface Leases {
  acquire(key: string, owner: string, ttlMs: number): Promise<LeaseClaimResult>;
  /** Extends a held lease; fails with `conflict` (lease_lost) when another holder or epoch owns the key now. */
  renew(lease: Lease, ttlMs: number): Promise<Lease>;
  /** Gives the lease up (a no-op when it was lost already). */
  release(lease: Lease): Promise<void>;
  /** The current holder of a key, or undefined when it is free. */
  holder(key: string): Promise<Lease | undefined>;
}

export interface ServiceConfig {
  name: string;
  version: string;
  description: string;
  metadata?: Record<string, string>;
  /**
   * Live figures of the actor (e.g. `{ in_flight: 3 }`), read when someone asks: they are the `data` of the
   * service's `load` endpoint in `$SRV.STATS` replies (and the reply of a request to that endpoint).
   */
  load?: () => Record<string, number>;
}

export interface ServiceHandle {
  stop(): Promise<void>;
}

export interface DiscoveredService {
  name: string;
  id: string;
  version: string;
  metadata: Record<string, string>;
}

/** Facts about one stream of the backend, for `agentmesh status`. */
export interface StreamFacts {
  name: string;
  messages: number;
  bytes: number;
  consumers: number;
  replicas: number;
}

/**
 * The one seam between the actors and the infrastructure: the message bus ({@link Bus}) plus key-value buckets, a
 * blob store, the durable run intake, the event log, leases and service discovery. Two implementations: NATS
 * (JetStream, KV, object store; {@link connectBackend}) and in-process ({@link memoryBackend}). Actors never ask
 * which one they have: what differs is data (`durable`).
 */
export interface Backend extends Bus {
  /** True when state outlives this process and is shared between processes (NATS JetStream). */
  readonly durable: boolean;
  /** Replicas every asset is created with. */
  readonly replicas: number;
  /** Opens (creating when missing) a key-value bucket. */
  kv(bucket: string, options?: KvBucketOptions): Promise<KvStore>;
  /** Opens (creating when missing) a blob store. */
  blobs(bucket: string, options?: BlobBucketOptions): Promise<BlobStore>;
  /** Opens (creating or updating) a work queue. */
  workQueue(options: WorkQueueOptions): Promise<WorkQueue>;
  /** Opens (creating or updating) an event log. */
  eventLog(options: EventLogOptions): Promise<EventLog>;
  /** Leases kept in the KV bucket `bucket`. */
  leases(bucket: string, options?: KvBucketOptions): Promise<Leases>;
  /** Announces this actor (NATS: `$SRV.PING/INFO/STATS`). */
  announce(config: ServiceConfig): Promise<ServiceHandle>;
  /** The actors announced now (optionally one service name), answering within `timeoutMs`. */
  discover(name?: string, timeoutMs?: number): Promise<DiscoveredService[]>;
  /** Facts about a stream (work queue or event log), or undefined when it does not exist. */
  streamFacts(stream: string): Promise<StreamFacts | undefined>;
}
