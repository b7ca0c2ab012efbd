import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { decodeText } from '../codec.js';
import { SlotTable } from '../slot-table.js';
import type { KvBucketOptions, KvStore } from '../stores/kv.js';
import type { BlobBucketOptions, BlobStore } from '../stores/blobs.js';
import type {
  Backend,
  DiscoveredService,
  EventLog,
  EventLogOptions,
  Leases,
  ServiceConfig,
  ServiceHandle,
  StreamFacts,
  WorkQueue,
  WorkQueueOptions,
} from '../backend/types.js';
import { MemoryBackendParts } from '../backend/memory-backend.js';
import type {
  BusHeaders,
  BusMessage,
  BusPayload,
  BusStatus,
  MessageHandler,
  PublishOptions,
  RequestOptions,
  SubscribeOptions,
  Subscription,
} from './types.js';
import {
  DEFAULT_MAX_PAYLOAD,
  DEFAULT_REQUEST_TIMEOUT_MS,
  InFlight,
  assertPayloadSize,
  cancelledError,
  closedError,
  invalidSubjectError,
  isValidSubject,
  payloadSize,
  noRespondersError,
  subjectMatches,
  timeoutError,
  toBytes,
} from './shared.js';

/** A message as published: a text body stays text until a subscriber asks for its bytes. */
class MemoryMessage implements BusMessage {
  constructor(
    readonly subject: string,
    private payload: BusPayload,
    readonly headers: BusHeaders | undefined,
    readonly reply: string | undefined,
  ) {}
  get data(): Uint8Array {
    if (typeof this.payload === 'string') this.payload = toBytes(this.payload);
    return this.payload;
  }
  text(): string {
    return typeof this.payload === 'string' ? this.payload : decodeText(this.payload);
  }
}

class MemorySubscription implements Subscription {
  closed = false;
  private readonly inFlight = new InFlight();
  constructor(
    readonly subject: string,
    readonly queue: string | undefined,
    private readonly handler: MessageHandler,
    private readonly bus: MemoryBus,
    private readonly onError: (error: unknown, subject: string) => void,
  ) {}

  deliver(msg: BusMessage): void {
    if (this.closed) return;
    try {
      const result = this.handler(msg);
      if (result instanceof Promise)
        this.inFlight.track(result.catch((e: unknown) => this.onError(e, msg.subject)));
    } catch (error) {
      this.onError(error, msg.subject);
    }
  }

  unsubscribe(): void {
    this.closed = true;
    this.bus.remove(this);
  }

  async drain(): Promise<void> {
    this.unsubscribe();
    await this.inFlight.settle();
  }
}

const MAX_CACHED_ROUTES = 4096;

export interface MemoryBusOptions {
  maxPayload?: number;
  logger?: Logger;
}

interface ReplyWaiter {
  inbox: string;
  deliver(msg: BusMessage): void;
}

/**
 * An in-process bus with NATS semantics: subject wildcards, queue groups that share load (round robin), request
 * timeouts, `no_responders`, payload limits. Delivery is asynchronous, like a network, and ordered per publisher.
 */
export class MemoryBus implements Backend {
  readonly kind = 'memory' as const;
  readonly durable = false;
  readonly replicas = 1;
  private readonly parts = new MemoryBackendParts(this);
  readonly maxPayload: number;
  private readonly subs = new Set<MemorySubscription>();
  private readonly exact = new Map<string, Set<MemorySubscription>>();
  private readonly wildcard = new Set<MemorySubscription>();
  private readonly queueCursor = new Map<string, number>();
  /** subject -> the subscriptions it reaches; emptied whenever a subscription comes or goes. */
  private readonly routes = new Map<string, MemorySubscription[]>();
  private readonly statusListeners = new Set<(status: BusStatus) => void>();
  private readonly logger: Logger | undefined;
  private closed = false;
  private readonly inboxPrefix = `_INBOX.${randomUUID().replaceAll('-', '')}`;
  private inboxCounter = 0;
  /** Replies to in-flight requests, delivered straight to their waiter (the request fast path). */
  private readonly replyWaiters = new SlotTable<ReplyWaiter>();
  private readonly replyPrefix = `${this.inboxPrefix}.r.`;

  constructor(options: MemoryBusOptions = {}) {
    this.maxPayload = options.maxPayload ?? DEFAULT_MAX_PAYLOAD;
    this.logger = options.logger;
  }

  publish(subject: string, data: BusPayload, options: PublishOptions = {}): void {
    if (this.closed) throw closedError();
    if (!isValidSubject(subject, false)) throw invalidSubjectError(subject);
    if (options.reply !== undefined && !isValidSubject(options.reply, false))
      throw invalidSubjectError(options.reply);
    assertPayloadSize(subject, payloadSize(data), this.maxPayload);
    const msg = new MemoryMessage(
      subject,
      data,
      options.headers ? { ...options.headers } : undefined,
      options.reply,
    );
    const waiter = this.replyWaiter(subject);
    if (waiter !== undefined) queueMicrotask(() => waiter.deliver(msg));
    else this.route(msg);
  }

  hasSubscribers(subject: string): boolean {
    return this.matching(subject).length > 0 || this.replyWaiter(subject) !== undefined;
  }

  private replyWaiter(subject: string): ReplyWaiter | undefined {
    if (!subject.startsWith(this.replyPrefix)) return undefined;
    const waiter = this.replyWaiters.get(parseInt(subject.slice(this.replyPrefix.length), 36));
    return waiter?.inbox === subject ? waiter : undefined;
  }

  /** Routes a message; returns how many subscriptions it reached. */
  private route(msg: MemoryMessage): number {
    const reached = this.matching(msg.subject);
    let targets: MemorySubscription[] = reached;
    let groups: Map<string, MemorySubscription[]> | undefined;
    if (reached.some((sub) => sub.queue !== undefined)) {
      targets = [];
      groups = new Map();
      for (const sub of reached) {
        if (sub.queue === undefined) targets.push(sub);
        else {
          const key = `${sub.subject}\u0000${sub.queue}`;
          const members = groups.get(key);
          if (members) members.push(sub);
          else groups.set(key, [sub]);
        }
      }
    }
    for (const [key, members] of groups ?? []) {
      const cursor = this.queueCursor.get(key) ?? 0;
      this.queueCursor.set(key, cursor + 1);
      targets.push(members[cursor % members.length]!);
    }
    if (targets.length === 1) {
      const only = targets[0]!;
      queueMicrotask(() => only.deliver(msg));
    } else if (targets.length > 0) queueMicrotask(() => targets.forEach((sub) => sub.deliver(msg)));
    return targets.length;
  }

  /** The subscriptions a subject reaches, exact ones first (cached until the subscriptions change). */
  private matching(subject: string): MemorySubscription[] {
    let reached = this.routes.get(subject);
    if (reached === undefined) {
      reached = [...(this.exact.get(subject) ?? [])];
      for (const sub of this.wildcard) if (subjectMatches(sub.subject, subject)) reached.push(sub);
      if (this.routes.size >= MAX_CACHED_ROUTES) this.routes.clear();
      this.routes.set(subject, reached);
    }
    return reached;
  }

  subscribe(subject: string, handler: MessageHandler, options: SubscribeOptions = {}): Subscription {
    if (this.closed) throw closedError();
    if (!isValidSubject(subject, true)) throw invalidSubjectError(subject);
    const sub = new MemorySubscription(subject, options.queue, handler, this, (error, s) =>
      this.logger?.error({ err: error, subject: s }, 'subscription handler failed'),
    );
    this.subs.add(sub);
    this.routes.clear();
    if (subject.includes('*') || subject.includes('>')) this.wildcard.add(sub);
    else {
      const set = this.exact.get(subject);
      if (set) set.add(sub);
      else this.exact.set(subject, new Set([sub]));
    }
    return sub;
  }

  /** @internal */
  remove(sub: MemorySubscription): void {
    this.subs.delete(sub);
    this.routes.clear();
    this.wildcard.delete(sub);
    const set = this.exact.get(sub.subject);
    if (set) {
      set.delete(sub);
      if (set.size === 0) this.exact.delete(sub.subject);
    }
  }

  request(subject: string, data: BusPayload, options: RequestOptions = {}): Promise<BusMessage> {
    if (this.closed) return Promise.reject(closedError());
    if (!isValidSubject(subject, false)) return Promise.reject(invalidSubjectError(subject));
    try {
      assertPayloadSize(subject, payloadSize(data), this.maxPayload);
    } catch (error) {
      return Promise.reject(error);
    }
    const signal = options.signal;
    if (signal?.aborted) return Promise.reject(cancelledError(subject, signal.reason));
    const timeoutMs = options.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    return new Promise<BusMessage>((resolve, reject) => {
      const finish = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.replyWaiters.delete(handle);
      };
      const onAbort = () => {
        finish();
        reject(cancelledError(subject, signal?.reason));
      };
      const waiter: ReplyWaiter = {
        inbox: '',
        deliver: (reply) => {
          finish();
          resolve(reply);
        },
      };
      const handle = this.replyWaiters.add(waiter);
      const inbox = (waiter.inbox = `${this.replyPrefix}${handle.toString(36)}`);
      const timer = setTimeout(() => {
        finish();
        reject(timeoutError(subject, timeoutMs));
      }, timeoutMs);
      signal?.addEventListener('abort', onAbort, { once: true });
      const reached = this.route(
        new MemoryMessage(subject, data, options.headers ? { ...options.headers } : undefined, inbox),
      );
      if (reached === 0) {
        finish();
        reject(noRespondersError(subject));
      }
    });
  }

  respond(msg: BusMessage, data: BusPayload, options: { headers?: BusHeaders } = {}): boolean {
    if (msg.reply === undefined || this.closed) return false;
    this.publish(msg.reply, data, options.headers ? { headers: options.headers } : {});
    return true;
  }

  async flush(): Promise<void> {
    await new Promise<void>((resolve) => setImmediate(resolve));
  }

  async drain(): Promise<void> {
    if (this.closed) return;
    await Promise.all([...this.subs].map((s) => s.drain()));
    await this.close();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const sub of [...this.subs]) sub.unsubscribe();
    for (const l of this.statusListeners) l({ type: 'close' });
  }

  onStatus(listener: (status: BusStatus) => void): () => void {
    this.statusListeners.add(listener);
    return () => this.statusListeners.delete(listener);
  }

  createInbox(): string {
    return `${this.inboxPrefix}.${++this.inboxCounter}`;
  }

  kv(bucket: string, options?: KvBucketOptions): Promise<KvStore> {
    return this.parts.kv(bucket, options);
  }
  blobs(bucket: string, options?: BlobBucketOptions): Promise<BlobStore> {
    return this.parts.blobs(bucket, options);
  }
  workQueue(options: WorkQueueOptions): Promise<WorkQueue> {
    return this.parts.workQueue(options);
  }
  eventLog(options: EventLogOptions): Promise<EventLog> {
    return this.parts.eventLog(options);
  }
  leases(bucket: string, options?: KvBucketOptions): Promise<Leases> {
    return this.parts.leases(bucket, options);
  }
  announce(config: ServiceConfig): Promise<ServiceHandle> {
    return this.parts.announce(config);
  }
  /** Lists the services announced on this backend (answers at once: `timeoutMs` is not needed). */
  discover(name?: string): Promise<DiscoveredService[]> {
    return this.parts.discover(name);
  }
  streamFacts(stream: string): Promise<StreamFacts | undefined> {
    return this.parts.streamFacts(stream);
  }
}
