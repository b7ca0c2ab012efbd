import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import { decodeText } from '../codec.js';
import { Deadlines, type Deadline } from '../deadlines.js';
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

/** A message as published: a text body stays text, and a JSON value unencoded, until a subscriber asks for bytes. */
class MemoryMessage implements BusMessage {
  /** The JSON value handed over, set only once the message is known to reach a single receiver. */
  value: unknown = undefined;
  /** The request this message is, whose reply goes straight to it. */
  waiter: PendingRequest | undefined = undefined;
  constructor(
    readonly subject: string,
    private payload: BusPayload | JsonBody,
    readonly headers: BusHeaders | undefined,
    readonly reply: string | undefined,
  ) {}
  get data(): Uint8Array {
    if (typeof this.payload === 'string') this.payload = toBytes(this.payload);
    else if (this.payload instanceof JsonBody) this.payload = toBytes(this.payload.text());
    return this.payload;
  }
  text(): string {
    const payload = this.payload;
    if (typeof payload === 'string') return payload;
    if (payload instanceof JsonBody) return payload.text();
    return decodeText(payload);
  }
  /** Gives the receiver the JSON value itself (the message reaches it alone). */
  handOver(): void {
    if (this.payload instanceof JsonBody) this.value = this.payload.value;
  }
}

/** A JSON body kept as the value handed over; encoded once, if a receiver asks for its text. */
class JsonBody {
  private encoded: string | undefined;
  constructor(readonly value: unknown) {}
  text(): string {
    return (this.encoded ??= JSON.stringify(this.value));
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
      if (result instanceof Promise) this.inFlight.track(result, (e) => this.onError(e, msg.subject));
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

/**
 * Deliveries run as reactions of this settled promise: microtasks like those of `queueMicrotask`, in the same order,
 * without the async resource Node makes for each of those (a delivery never throws: handler errors are caught).
 */
const later = Promise.resolve();

/** The member of a queue group whose turn it is. */
function pick(group: Route['groups'][number]): MemorySubscription {
  return group.members[group.cursor.next++ % group.members.length]!;
}

export interface MemoryBusOptions {
  maxPayload?: number;
  logger?: Logger;
}

/** A request waiting for its reply, its deadline or its signal's abort, whichever comes first. */
class PendingRequest implements Deadline {
  readonly promise: Promise<BusMessage>;
  readonly at: number;
  inbox = '';
  private handle = 0;
  private deadline = 0;
  private resolve!: (msg: BusMessage) => void;
  private reject!: (error: Error) => void;
  private onAbort: (() => void) | undefined;

  constructor(
    readonly owner: MemoryBus,
    private readonly subject: string,
    private readonly timeoutMs: number,
    private readonly signal: AbortSignal | undefined,
  ) {
    this.promise = new Promise<BusMessage>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    this.at = performance.now() + timeoutMs;
  }

  /** Starts waiting under `handle` (its slot among the bus's reply waiters) with its reply subject. */
  wait(handle: number, inbox: string, deadlines: Deadlines): void {
    this.handle = handle;
    this.inbox = inbox;
    this.deadline = deadlines.add(this);
    if (this.signal === undefined) return;
    const signal = this.signal;
    this.onAbort = () => this.fail(cancelledError(this.subject, signal.reason));
    signal.addEventListener('abort', this.onAbort, { once: true });
  }

  deliver(msg: BusMessage): void {
    if (this.finish()) this.resolve(msg);
  }

  expire(): void {
    this.fail(timeoutError(this.subject, this.timeoutMs));
  }

  fail(error: Error): void {
    if (this.finish()) this.reject(error);
  }

  private finish(): boolean {
    if (!this.owner.endRequest(this.handle, this.deadline)) return false;
    if (this.onAbort !== undefined) this.signal?.removeEventListener('abort', this.onAbort);
    return true;
  }
}

/** Where a subject's messages go: the subscriptions outside queue groups, and the members of each queue group. */
interface Route {
  plain: MemorySubscription[];
  groups: { cursor: { next: number }; members: MemorySubscription[] }[];
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
  /** Round-robin position of each queue group (`<subject>\0<queue>`), kept while routes come and go. */
  private readonly queueCursor = new Map<string, { next: number }>();
  /** subject -> where its messages go; emptied whenever a subscription comes or goes. */
  private readonly routes = new Map<string, Route>();
  private readonly statusListeners = new Set<(status: BusStatus) => void>();
  private readonly logger: Logger | undefined;
  private closed = false;
  private readonly inboxPrefix = `_INBOX.${randomUUID().replaceAll('-', '')}`;
  private inboxCounter = 0;
  /** Requests in flight, whose replies are delivered straight to them (the request fast path). */
  private readonly replyWaiters = new SlotTable<PendingRequest>();
  /** The request timeouts, on one timer. */
  private readonly deadlines = new Deadlines();
  private readonly replyPrefix = `${this.inboxPrefix}.r.`;

  constructor(options: MemoryBusOptions = {}) {
    this.maxPayload = options.maxPayload ?? DEFAULT_MAX_PAYLOAD;
    this.logger = options.logger;
  }

  publish(subject: string, data: BusPayload, options: PublishOptions = {}): void {
    this.publishMessage(subject, data, options);
  }

  private publishMessage(
    subject: string,
    data: BusPayload | JsonBody,
    options: PublishOptions,
    known?: PendingRequest,
  ): void {
    if (this.closed) throw closedError();
    const waiter = known ?? this.replyWaiter(subject);
    if (waiter === undefined && !this.isKnownSubject(subject)) throw invalidSubjectError(subject);
    if (options.reply !== undefined && !isValidSubject(options.reply, false))
      throw invalidSubjectError(options.reply);
    if (!(data instanceof JsonBody)) assertPayloadSize(subject, payloadSize(data), this.maxPayload);
    const msg = new MemoryMessage(
      subject,
      data,
      options.headers ? { ...options.headers } : undefined,
      options.reply,
    );
    if (waiter !== undefined) {
      msg.handOver();
      void later.then(() => waiter.deliver(msg));
    } else this.route(msg);
  }

  /** Whether messages may be sent to `subject`: one already routed is, without checking it again. */
  private isKnownSubject(subject: string): boolean {
    return this.routes.has(subject) || isValidSubject(subject, false);
  }

  hasSubscribers(subject: string): boolean {
    // a subject that cannot be published to reaches nobody, and gets no route (a route vouches for its subject)
    if (!this.isKnownSubject(subject)) return false;
    const { plain, groups } = this.matching(subject);
    return plain.length + groups.length > 0 || this.replyWaiter(subject) !== undefined;
  }

  private replyWaiter(subject: string): PendingRequest | undefined {
    if (!subject.startsWith(this.replyPrefix)) return undefined;
    const waiter = this.replyWaiters.get(SlotTable.fromToken(subject.slice(this.replyPrefix.length)));
    return waiter?.inbox === subject ? waiter : undefined;
  }

  /** Routes a message; returns how many subscriptions it reached. */
  private route(msg: MemoryMessage): number {
    const { plain, groups } = this.matching(msg.subject);
    if (groups.length === 0 && plain.length === 1) return this.deliverTo(plain[0]!, msg);
    if (groups.length === 1 && plain.length === 0) return this.deliverTo(pick(groups[0]!), msg);
    const targets = groups.length === 0 ? plain : [...plain, ...groups.map(pick)];
    if (targets.length > 0) void later.then(() => targets.forEach((sub) => sub.deliver(msg)));
    return targets.length;
  }

  private deliverTo(sub: MemorySubscription, msg: MemoryMessage): number {
    msg.handOver();
    void later.then(() => sub.deliver(msg));
    return 1;
  }

  /** Where a subject's messages go, exact subscriptions first (cached until the subscriptions change). */
  private matching(subject: string): Route {
    let route = this.routes.get(subject);
    if (route === undefined) {
      const reached = [...(this.exact.get(subject) ?? [])];
      for (const sub of this.wildcard) if (subjectMatches(sub.subject, subject)) reached.push(sub);
      route = { plain: [], groups: [] };
      const groups = new Map<string, MemorySubscription[]>();
      for (const sub of reached) {
        if (sub.queue === undefined) {
          route.plain.push(sub);
          continue;
        }
        const key = `${sub.subject}\u0000${sub.queue}`;
        const members = groups.get(key);
        if (members !== undefined) members.push(sub);
        else groups.set(key, [sub]);
      }
      for (const [key, members] of groups) {
        let cursor = this.queueCursor.get(key);
        if (cursor === undefined) this.queueCursor.set(key, (cursor = { next: 0 }));
        route.groups.push({ cursor, members });
      }
      if (this.routes.size >= MAX_CACHED_ROUTES) this.routes.clear();
      this.routes.set(subject, route);
    }
    return route;
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
    try {
      if (this.closed) throw closedError();
      if (!this.isKnownSubject(subject)) throw invalidSubjectError(subject);
      assertPayloadSize(subject, payloadSize(data), this.maxPayload);
    } catch (error) {
      return Promise.reject(error as Error);
    }
    return this.send(subject, data, options);
  }

  /**
   * {@link request} with a JSON body handed over as a value: it reaches a single receiver as `msg.value`, without
   * being encoded and decoded; other receivers get its JSON text. The sender gives up a value made for this message
   * that it checked to be plain JSON data within the payload limit (see {@link Bus.requestValue}).
   */
  requestValue(subject: string, value: unknown, options: RequestOptions = {}): Promise<BusMessage> {
    if (this.closed) return Promise.reject(closedError());
    if (!this.isKnownSubject(subject)) return Promise.reject(invalidSubjectError(subject));
    return this.send(subject, new JsonBody(value), options);
  }

  private send(subject: string, body: BusPayload | JsonBody, options: RequestOptions): Promise<BusMessage> {
    const signal = options.signal;
    if (signal?.aborted) return Promise.reject(cancelledError(subject, signal.reason));
    const pending = new PendingRequest(
      this,
      subject,
      options.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS,
      signal,
    );
    const handle = this.replyWaiters.add(pending);
    pending.wait(handle, `${this.replyPrefix}${SlotTable.token(handle)}`, this.deadlines);
    const msg = new MemoryMessage(
      subject,
      body,
      options.headers ? { ...options.headers } : undefined,
      pending.inbox,
    );
    msg.waiter = pending;
    const reached = this.route(msg);
    if (reached === 0) pending.fail(noRespondersError(subject));
    return pending.promise;
  }

  /** @internal Ends a request: false when it had ended already. */
  endRequest(handle: number, deadline: number): boolean {
    if (!this.replyWaiters.delete(handle)) return false;
    this.deadlines.delete(deadline);
    return true;
  }

  respond(msg: BusMessage, data: BusPayload, options: { headers?: BusHeaders } = {}): boolean {
    if (msg.reply === undefined || this.closed) return false;
    this.publishMessage(
      msg.reply,
      data,
      options.headers ? { headers: options.headers } : {},
      this.waiterOf(msg),
    );
    return true;
  }

  /** {@link respond} with a JSON body handed over as a value (see {@link requestValue}). */
  respondValue(msg: BusMessage, value: unknown, options: { headers?: BusHeaders } = {}): boolean {
    if (msg.reply === undefined || this.closed) return false;
    this.publishMessage(
      msg.reply,
      new JsonBody(value),
      options.headers ? { headers: options.headers } : {},
      this.waiterOf(msg),
    );
    return true;
  }

  /** The request of this bus a message is, when its reply subject is still that request's inbox. */
  private waiterOf(msg: BusMessage): PendingRequest | undefined {
    const waiter = msg instanceof MemoryMessage ? msg.waiter : undefined;
    return waiter?.owner === this && waiter.inbox === msg.reply ? waiter : undefined;
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
