/** nats-core messages and subscriptions as the bus's own: headers, text, handler errors, and drained subscriptions. */
import { PermissionViolationError, headers as natsHeaders } from '@nats-io/nats-core';
import type { Msg, MsgHdrs, NatsConnection, Subscription as NatsSubscription } from '@nats-io/nats-core';
import { decodeText } from '../codec.js';
import { AgentMeshError, ErrorCode } from '../errors.js';
import type { BusHeaders, BusMessage, MessageHandler, Subscription } from './types.js';

/** A nats-core error as the named error a request gets: `permission_denied` for a permission violation. */
export function busError(error: Error, subject: string): AgentMeshError {
  if (error instanceof PermissionViolationError)
    return new AgentMeshError(
      ErrorCode.PermissionDenied,
      `NATS refused to ${error.operation === 'publish' ? 'publish to' : 'subscribe to'} ${error.subject} (request to ${subject}): permissions violation`,
      {
        retryable: false,
        cause: error,
        details: { subject, operation: error.operation, denied_subject: error.subject },
      },
    );
  return AgentMeshError.from(error, ErrorCode.Unavailable);
}

export function toNatsHeaders(h: BusHeaders | undefined): MsgHdrs | undefined {
  if (h === undefined) return undefined;
  const out = natsHeaders();
  for (const [k, v] of Object.entries(h)) out.set(k, v);
  return out;
}

export function fromNatsHeaders(h: MsgHdrs | undefined): BusHeaders | undefined {
  if (h === undefined) return undefined;
  const out: BusHeaders = {};
  for (const k of h.keys()) out[k] = h.get(k);
  return out;
}

export class NatsMessage implements BusMessage {
  private cachedHeaders: BusHeaders | undefined | null = null;
  constructor(private readonly msg: Msg) {}
  get subject(): string {
    return this.msg.subject;
  }
  get data(): Uint8Array {
    return this.msg.data;
  }
  get reply(): string | undefined {
    return this.msg.reply === '' ? undefined : this.msg.reply;
  }
  get headers(): BusHeaders | undefined {
    if (this.cachedHeaders === null) this.cachedHeaders = fromNatsHeaders(this.msg.headers);
    return this.cachedHeaders;
  }
  text(): string {
    return decodeText(this.msg.data);
  }
}

export class NatsBusSubscription implements Subscription {
  private running = 0;
  private idle: (() => void)[] = [];
  readonly sub: NatsSubscription;
  constructor(
    nc: NatsConnection,
    readonly subject: string,
    readonly queue: string | undefined,
    handler: MessageHandler,
    private readonly onError: (error: unknown, subject: string) => void,
  ) {
    this.sub = nc.subscribe(subject, {
      ...(queue === undefined ? {} : { queue }),
      callback: (err, msg) => {
        if (err) {
          onError(err, subject);
          return;
        }
        try {
          const result = handler(new NatsMessage(msg));
          if (result instanceof Promise) {
            this.running++;
            result.then(this.settled, this.failed);
          }
        } catch (error) {
          onError(error, msg.subject);
        }
      },
    });
  }
  unsubscribe(): void {
    if (!this.sub.isClosed()) this.sub.unsubscribe();
  }
  async drain(): Promise<void> {
    if (!this.sub.isClosed()) await this.sub.drain().catch(() => undefined);
    if (this.running > 0) await new Promise<void>((resolve) => this.idle.push(resolve));
  }
  private readonly failed = (error: unknown): void => {
    this.settled();
    this.onError(error, this.subject);
  };

  private readonly settled = (): void => {
    if (--this.running > 0 || this.idle.length === 0) return;
    const waiting = this.idle;
    this.idle = [];
    for (const resolve of waiting) resolve();
  };
}
