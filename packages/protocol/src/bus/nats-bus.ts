import { connect } from '@nats-io/transport-node';
import { randomBytes } from 'node:crypto';
import { PermissionViolationError } from '@nats-io/nats-core';
import type { ConnectionOptions, NatsConnection } from '@nats-io/nats-core';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type { Logger } from 'pino';
import { INBOX_SUBJECT } from '../subjects.js';
import { AgentMeshError, ErrorCode } from '../errors.js';
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
import { NatsBackendParts } from '../backend/nats-backend.js';
import { NatsBusSubscription, NatsMessage, toNatsHeaders } from './nats-message.js';
import { NatsRequestMux } from './nats-request-mux.js';
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
  EMPTY,
  assertPayloadSize,
  cancelledError,
  closedError,
  invalidSubjectError,
  isPublishableSubject,
} from './shared.js';
import { clusteredCasWarning } from './server-version.js';
import { endAnsweredRequestsWithoutError } from './nats-answered-request.js';

/**
 * Bytes buffered before the client writes at once instead of at the end of the current microtask (nats-core's own
 * default is 32 KiB). A turn that publishes many messages (a worker answering a batch of calls, a planner sending a
 * turn's calls) then goes out in pieces the server routes while this process still makes the rest: 8-12% more calls
 * per second at 64 in flight in `npm run bench`, with no change at 1 in flight. nats-core reads it as `pendingLimit`,
 * an option it does not declare.
 */
const FLUSH_THRESHOLD_BYTES = 8 * 1024;

export interface NatsBusOptions {
  /** Connection name shown by the server (monitoring, `$SYS`). */
  name?: string;
  user?: string;
  pass?: string;
  token?: string;
  /** Fail at connect when the server has no JetStream (default true). */
  requireJetStream?: boolean;
  logger?: Logger;
  /** Give up connecting after this long (default 5000 ms). */
  connectTimeoutMs?: number;
  /**
   * Prefix of every reply subject this connection creates (its request replies, JetStream consumers, KV watches).
   * Default: `_INBOX_<user>` when the connection authenticates as a user (in the options or the URL), `_INBOX`
   * otherwise; so server permissions can give each role its own inbox space and no role reads another's replies.
   */
  inboxPrefix?: string;
  /**
   * Replicas of the streams, KV buckets and object stores this backend creates or updates. Left out: assets are
   * created with 1 and existing ones keep theirs (never scaled down by a client that did not ask).
   */
  replicas?: number;
}

/**
 * The token that makes an inbox unique: 12 random base64url characters (72 bits), 10 fewer than a nuid. An inbox
 * needs only to be unique (the reply secret, not this, keeps a reply from being forged), and it is in each call three
 * times: in the request's and the reply's protocol lines, and as the progress subject in the request.
 */
function inboxToken(): string {
  return randomBytes(9).toString('base64url');
}

function replicasOf(replicas: number | undefined): number {
  if (replicas === undefined) return 1;
  if (!Number.isInteger(replicas) || replicas < 1 || replicas > 5)
    throw new AgentMeshError(
      ErrorCode.InvalidConfig,
      `replicas must be a whole number from 1 to 5 (JetStream's limit), got ${String(replicas)}`,
      { retryable: false, details: { replicas } },
    );
  return replicas;
}

/** The reply-subject prefix of a connection: explicit, else `_INBOX_<user>` for an authenticated user, else `_INBOX`. */
export function inboxPrefixFor(servers: string | string[], options: NatsBusOptions = {}): string {
  if (options.inboxPrefix !== undefined) return options.inboxPrefix;
  let user = options.user;
  if (user === undefined) {
    for (const server of Array.isArray(servers) ? servers : [servers]) {
      try {
        const url = new URL(server.includes('://') ? server : `nats://${server}`);
        if (url.username !== '') user = decodeURIComponent(url.username);
      } catch {
        // not a URL: no user in it
      }
      if (user !== undefined) break;
    }
  }
  const safe = user?.replace(/[^A-Za-z0-9_-]/g, '_');
  return safe === undefined || safe === '' ? '_INBOX' : `_INBOX_${safe}`;
}

/** The server has JetStream, but its API does not answer yet (a cluster without a meta leader): retryable. */
function jetStreamNotReady(servers: string | string[], error: unknown): AgentMeshError {
  return new AgentMeshError(
    ErrorCode.Unavailable,
    `JetStream at ${String(servers)} is not ready (no cluster leader yet?): ${(error as Error).message}`,
    { retryable: true, cause: error, details: { servers } },
  );
}

/**
 * The production bus on the @nats-io v3 clients. Requests go through one shared reply subscription (a request
 * multiplexer with cheap errors), which is what makes many requests in flight fast. It also hands out JetStream,
 * KV and object store access to the actors.
 */
export class NatsBus implements Backend {
  readonly kind = 'nats' as const;
  readonly durable = true;
  private readonly parts: NatsBackendParts;
  private readonly requests: NatsRequestMux;
  private readonly statusListeners = new Set<(status: BusStatus) => void>();
  private readonly subs = new Set<NatsBusSubscription>();
  private closed = false;
  private jsClient: JetStreamClient | undefined;
  private jsManager: JetStreamManager | undefined;

  private constructor(
    readonly nc: NatsConnection,
    private readonly logger: Logger | undefined,
    /** The connection's reply-subject prefix (see {@link inboxPrefixFor}). */
    readonly replyPrefix: string,
    /** Replicas of every JetStream asset this backend creates. */
    readonly replicas: number,
    enforceReplicas: boolean,
  ) {
    this.requests = new NatsRequestMux(
      nc,
      `${replyPrefix}.${inboxToken()}`,
      (subject, bytes, reply, headers) => this.send(subject, bytes, reply, headers),
      logger,
    );
    this.parts = new NatsBackendParts(this, replicas, enforceReplicas, logger);
    void this.watchStatus();
  }

  /** Connects to NATS; with `requireJetStream` (default) fails with `jetstream_unavailable` when JetStream is off. */
  static async connect(servers: string | string[], options: NatsBusOptions = {}): Promise<NatsBus> {
    let nc: NatsConnection;
    const replicas = replicasOf(options.replicas);
    const replyPrefix = inboxPrefixFor(servers, options);
    endAnsweredRequestsWithoutError();
    try {
      nc = await connect({
        pendingLimit: FLUSH_THRESHOLD_BYTES,
        servers,
        name: options.name ?? 'agentmesh',
        maxReconnectAttempts: -1,
        reconnectTimeWait: 250,
        timeout: options.connectTimeoutMs ?? 5000,
        pingInterval: 10_000,
        ...(options.user === undefined ? {} : { user: options.user, pass: options.pass ?? '' }),
        ...(options.token === undefined ? {} : { token: options.token }),
        inboxPrefix: replyPrefix,
        // nats-core otherwise captures a stack trace (an Error) for every request it makes, which JetStream makes
        // for each publish, KV operation and direct get; our errors name the operation instead
        noAsyncTraces: true,
      } as ConnectionOptions);
    } catch (error) {
      const message = (error as Error).message;
      if (/authori[sz]ation|authentication|permissions/i.test(message))
        throw new AgentMeshError(
          ErrorCode.PermissionDenied,
          `NATS at ${String(servers)} refused the connection: ${message}. Check NATS_USER / NATS_PASSWORD / NATS_TOKEN.`,
          { retryable: false, cause: error, details: { servers } },
        );
      throw new AgentMeshError(
        ErrorCode.Unavailable,
        `cannot connect to NATS at ${String(servers)}: ${message}. Start one with "nats-server -js" or set NATS_URL.`,
        { retryable: true, cause: error, details: { servers } },
      );
    }
    const bus = new NatsBus(nc, options.logger, replyPrefix, replicas, options.replicas !== undefined);
    const casWarning = clusteredCasWarning(nc.info);
    if (casWarning !== undefined)
      options.logger?.warn({ server_version: nc.info?.version, cluster: nc.info?.cluster }, casWarning);
    if (options.requireJetStream ?? true) {
      try {
        await bus.jetstreamManager();
      } catch (error) {
        const announced = nc.info?.jetstream === true;
        await nc.close();
        if (announced) throw jetStreamNotReady(servers, error);
        throw new AgentMeshError(
          ErrorCode.JetStreamUnavailable,
          `NATS at ${String(servers)} has no JetStream: start the server with "nats-server -js" (or enable jetstream in its config)`,
          { retryable: false, cause: error },
        );
      }
    }
    return bus;
  }

  get maxPayload(): number {
    return this.nc.info?.max_payload ?? 1024 * 1024;
  }

  /** The JetStream client of this connection. */
  jetstream(): JetStreamClient {
    this.jsClient ??= jetstream(this.nc);
    return this.jsClient;
  }

  /** The JetStream manager; rejects when the server has no JetStream. */
  async jetstreamManager(): Promise<JetStreamManager> {
    this.jsManager ??= await jetstreamManager(this.nc, { checkAPI: true });
    return this.jsManager;
  }

  private async watchStatus(): Promise<void> {
    for await (const s of this.nc.status()) {
      const type =
        s.type === 'disconnect' || s.type === 'reconnect' || s.type === 'reconnecting' || s.type === 'error'
          ? s.type
          : undefined;
      if (type === undefined) continue;
      if (
        s.type === 'error' &&
        s.error instanceof PermissionViolationError &&
        s.error.operation === 'publish'
      )
        this.requests.publishRefused(s.error);
      const detail = 'server' in s ? String(s.server) : 'error' in s ? String(s.error) : undefined;
      this.logger?.info({ status: type, detail }, 'nats connection status');
      for (const l of this.statusListeners) l({ type, ...(detail === undefined ? {} : { detail }) });
    }
  }

  /**
   * Checks what a caller publishes: an open bus, a subject that cannot break the protocol line, the size limit; and
   * returns the body as bytes.
   */
  private checkOutgoing(subject: string, data: BusPayload, reply: string | undefined): Uint8Array {
    if (this.closed || this.nc.isClosed()) throw closedError();
    if (!isPublishableSubject(subject)) throw invalidSubjectError(subject);
    if (reply !== undefined && !isPublishableSubject(reply)) throw invalidSubjectError(reply);
    return this.sized(subject, data);
  }

  /**
   * A body as the bytes that go out, within the size limit. A string is encoded once, with `Buffer.from` (about half
   * the cost of the TextEncoder nats-core would use), and its size is the length of what that made.
   */
  private sized(subject: string, data: BusPayload): Uint8Array {
    const bytes = typeof data !== 'string' ? data : data.length === 0 ? EMPTY : Buffer.from(data, 'utf8');
    assertPayloadSize(subject, bytes.length, this.maxPayload);
    return bytes;
  }

  publish(subject: string, data: BusPayload, options: PublishOptions = {}): void {
    const bytes = this.checkOutgoing(subject, data, options.reply);
    this.send(subject, bytes, options.reply, options.headers);
  }

  /** Publishes a checked message through nats-core's public publish. */
  private send(
    subject: string,
    bytes: Uint8Array,
    reply: string | undefined,
    headers: BusHeaders | undefined,
  ): void {
    const h = toNatsHeaders(headers);
    this.nc.publish(
      subject,
      bytes.length === 0 ? EMPTY : bytes,
      h === undefined
        ? reply === undefined
          ? undefined
          : { reply }
        : { headers: h, ...(reply === undefined ? {} : { reply }) },
    );
  }

  subscribe(subject: string, handler: MessageHandler, options: SubscribeOptions = {}): Subscription {
    if (this.closed) throw closedError();
    const sub = new NatsBusSubscription(this.nc, subject, options.queue, handler, (error, s) =>
      this.logger?.error({ err: error, subject: s }, 'subscription handler failed'),
    );
    this.subs.add(sub);
    void sub.sub.closed.then(() => this.subs.delete(sub));
    return sub;
  }

  request(subject: string, data: BusPayload, options: RequestOptions = {}): Promise<BusMessage> {
    let bytes: Uint8Array;
    try {
      bytes = this.checkOutgoing(subject, data, undefined);
    } catch (error) {
      return Promise.reject(error);
    }
    const signal = options.signal;
    if (signal?.aborted) return Promise.reject(cancelledError(subject, signal.reason));
    return new Promise<BusMessage>((resolve, reject) =>
      this.requests.send(subject, bytes, options, resolve, reject),
    );
  }

  requestCallback(
    subject: string,
    data: BusPayload,
    options: RequestOptions,
    settled: (error: unknown, reply: BusMessage | undefined) => void,
  ): void {
    let bytes: Uint8Array;
    try {
      bytes = this.checkOutgoing(subject, data, undefined);
      if (options.signal?.aborted) throw cancelledError(subject, options.signal.reason);
    } catch (error) {
      // as `request` rejects: after this turn, never inside the caller's own call
      queueMicrotask(() => settled(error, undefined));
      return;
    }
    this.requests.send(
      subject,
      bytes,
      options,
      (reply) => settled(undefined, reply),
      (error) => settled(error, undefined),
    );
  }

  respond(msg: BusMessage, data: BusPayload, options?: { headers?: BusHeaders }): boolean {
    const reply = msg.reply;
    if (reply === undefined || this.nc.isClosed()) return false;
    if (!(msg instanceof NatsMessage) && !isPublishableSubject(reply)) throw invalidSubjectError(reply);
    if (!INBOX_SUBJECT.test(reply)) {
      this.logger?.warn(
        { subject: msg.subject, reply },
        'request not answered: its reply subject is not an inbox',
      );
      return false;
    }
    this.send(reply, this.sized(reply, data), undefined, options?.headers);
    return true;
  }

  async flush(): Promise<void> {
    await this.nc.flush();
  }

  async drain(): Promise<void> {
    if (this.closed) return;
    await Promise.all([...this.subs].map((s) => s.drain()));
    this.closed = true;
    this.requests.failAll();
    if (!this.nc.isClosed()) await this.nc.drain().catch(() => undefined);
  }

  async close(): Promise<void> {
    if (this.closed && this.nc.isClosed()) return;
    this.closed = true;
    this.requests.failAll();
    if (!this.nc.isClosed()) await this.nc.close();
  }

  onStatus(listener: (status: BusStatus) => void): () => void {
    this.statusListeners.add(listener);
    return () => this.statusListeners.delete(listener);
  }

  createInbox(): string {
    return `${this.replyPrefix}.${inboxToken()}`;
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
  discover(name?: string, timeoutMs?: number): Promise<DiscoveredService[]> {
    return this.parts.discover(name, timeoutMs);
  }
  streamFacts(stream: string): Promise<StreamFacts | undefined> {
    return this.parts.streamFacts(stream);
  }
}
