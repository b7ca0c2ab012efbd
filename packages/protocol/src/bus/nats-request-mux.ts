import type {
  NatsConnection,
  PermissionViolationError,
  Subscription as NatsSubscription,
} from '@nats-io/nats-core';
import type { Logger } from 'pino';
import { AgentMeshError, ErrorCode } from '../errors.js';
import { SlotTable } from '../slot-table.js';
import { REPLY_SECRET_LENGTH, replySecret } from '../reply-secret.js';
import { NatsMessage, busError } from './nats-message.js';
import type { BusHeaders, BusMessage, RequestOptions } from './types.js';
import {
  DEFAULT_REQUEST_TIMEOUT_MS,
  cancelledError,
  closedError,
  noRespondersError,
  timeoutError,
} from './shared.js';

const MAX_TIMER_MS = 2 ** 31 - 1;

interface PendingRequest {
  subject: string;
  /** The request's reply subject: a reply on any other (a guessed handle without its secret) is ignored. */
  reply: string;
  resolve: (msg: BusMessage) => void;
  reject: (error: unknown) => void;
  deadline: number;
  timeoutMs: number;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
}

/** Publishes a checked message (the bus's own publish, after its checks). */
export type SendChecked = (
  subject: string,
  bytes: Uint8Array,
  reply: string | undefined,
  headers: BusHeaders | undefined,
) => void;

/**
 * The requests of one connection in flight: one shared reply subscription (`<inbox prefix>.*`), each request's reply
 * subject `<inbox prefix>.<secret><handle>`, and one timer for every deadline. A reply settles its request only on
 * the exact subject it was given, so a guessed handle without its secret is ignored.
 */
export class NatsRequestMux {
  /** Where the handle starts in a reply subject. */
  private readonly handleAt: number;
  private readonly pending = new SlotTable<PendingRequest>();
  private sub: NatsSubscription | undefined;
  /** One timer for every pending request, armed for the earliest deadline it knows of. */
  private expiry: NodeJS.Timeout | undefined;
  private expiryAt = Infinity;

  constructor(
    private readonly nc: NatsConnection,
    private readonly inboxPrefix: string,
    private readonly sendChecked: SendChecked,
    private readonly logger: Logger | undefined,
  ) {
    this.handleAt = inboxPrefix.length + 1 + REPLY_SECRET_LENGTH;
  }

  /** Sends a checked request whose reply or failure goes to `resolve` or `reject`, once. */
  send(
    subject: string,
    bytes: Uint8Array,
    options: RequestOptions,
    resolve: (msg: BusMessage) => void,
    reject: (error: unknown) => void,
  ): void {
    const signal = options.signal;
    this.subscribeOnce();
    const timeoutMs = options.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    const p: PendingRequest = {
      subject,
      resolve,
      reject,
      deadline: Date.now() + timeoutMs,
      timeoutMs,
      signal,
      onAbort: undefined,
      reply: '',
    };
    this.armExpiry(p.deadline);
    const handle = this.pending.add(p);
    p.reply = `${this.inboxPrefix}.${replySecret()}${SlotTable.token(handle)}`;
    if (signal) {
      p.onAbort = () => {
        this.settle(handle, p);
        reject(cancelledError(subject, signal.reason));
      };
      signal.addEventListener('abort', p.onAbort, { once: true });
    }
    try {
      this.sendChecked(subject, bytes, p.reply, options.headers);
    } catch (error) {
      this.settle(handle, p);
      reject(AgentMeshError.from(error, ErrorCode.Unavailable));
    }
  }

  /** A request whose publish the server refused: its waiters get `permission_denied`, not a timeout. */
  publishRefused(error: PermissionViolationError): void {
    this.pending.forEach((p, handle) => {
      if (p.subject !== error.subject) return;
      this.settle(handle, p);
      p.reject(busError(error, p.subject));
    });
  }

  /** The connection is closing: every waiting request fails as `closed`, and the timer goes. */
  failAll(): void {
    this.pending.forEach((p, handle) => {
      this.settle(handle, p);
      p.reject(closedError());
    });
    clearTimeout(this.expiry);
    this.expiry = undefined;
    this.expiryAt = Infinity;
  }

  private subscribeOnce(): void {
    if (this.sub !== undefined && !this.sub.isClosed()) return;
    const sub = this.nc.subscribe(`${this.inboxPrefix}.*`, {
      callback: (err, msg) => {
        if (err !== null) {
          this.subscriptionFailed(sub, err);
          return;
        }
        const handle = SlotTable.fromToken(msg.subject.slice(this.handleAt));
        const p = this.pending.get(handle);
        if (p === undefined || p.reply !== msg.subject) return;
        this.settle(handle, p);
        if (msg.data.length === 0 && msg.headers?.code === 503) p.reject(noRespondersError(p.subject));
        else p.resolve(new NatsMessage(msg));
      },
    });
    this.sub = sub;
  }

  /**
   * The shared reply subscription failed (a permission violation on the inbox): every waiting request gets the named
   * error at once, and the next request subscribes again.
   */
  private subscriptionFailed(sub: NatsSubscription, error: Error): void {
    if (this.sub === sub) this.sub = undefined;
    this.logger?.error({ err: error, subject: sub.getSubject() }, 'reply subscription failed');
    this.pending.forEach((p, handle) => {
      this.settle(handle, p);
      p.reject(busError(error, p.subject));
    });
  }

  private settle(handle: number, p: PendingRequest): void {
    this.pending.delete(handle);
    if (this.pending.size === 0) this.expiry?.unref();
    if (p.onAbort) p.signal?.removeEventListener('abort', p.onAbort);
  }

  private armExpiry(deadline: number): void {
    if (this.expiry !== undefined) {
      if (deadline >= this.expiryAt) {
        this.expiry.ref();
        return;
      }
      clearTimeout(this.expiry);
    }
    this.expiryAt = deadline;
    this.expiry = setTimeout(this.expire, Math.min(MAX_TIMER_MS, Math.max(1, deadline - Date.now())));
  }

  private readonly expire = (): void => {
    this.expiry = undefined;
    this.expiryAt = Infinity;
    const now = Date.now();
    let next = Infinity;
    this.pending.forEach((p, handle) => {
      if (p.deadline > now) {
        if (p.deadline < next) next = p.deadline;
        return;
      }
      this.settle(handle, p);
      p.reject(timeoutError(p.subject, p.timeoutMs));
    });
    if (next !== Infinity) this.armExpiry(next);
  };
}
