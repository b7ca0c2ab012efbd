export type BusHeaders = Record<string, string>;
export type BusPayload = Uint8Array | string;

/** A message as delivered to a subscriber. */
export interface BusMessage {
  readonly subject: string;
  readonly data: Uint8Array;
  readonly headers: BusHeaders | undefined;
  readonly reply: string | undefined;
  /** The body as UTF-8 text. */
  text(): string;
  /**
   * The body as a JSON value, when an in-process bus handed one over ({@link Bus.requestValue},
   * {@link Bus.respondValue}) to this one receiver, which then owns it: equal to what decoding the body gives.
   * Undefined otherwise (decode the body).
   */
  readonly value?: unknown;
}

export interface Subscription {
  readonly subject: string;
  readonly queue: string | undefined;
  /** Stops delivery at once. */
  unsubscribe(): void;
  /** Stops taking new messages and waits for handlers of delivered ones to settle. */
  drain(): Promise<void>;
}

export interface PublishOptions {
  headers?: BusHeaders;
  reply?: string;
}

export interface SubscribeOptions {
  /** Members of one queue group share the messages: each goes to exactly one of them. */
  queue?: string;
}

export interface RequestOptions {
  /** Default 5000 ms. */
  timeoutMs?: number;
  signal?: AbortSignal;
  headers?: BusHeaders;
}

export type MessageHandler = (msg: BusMessage) => void | Promise<void>;

/** Connection state changes an actor may want to log or act on. */
export type BusStatus = {
  type: 'disconnect' | 'reconnect' | 'reconnecting' | 'error' | 'close';
  detail?: string;
};

/**
 * The message bus every actor talks over: NATS in production ({@link NatsBus}), in-process for embedded runs and
 * tests ({@link MemoryBus}). Both honour the same contract: queue groups share load, requests time out and honour
 * AbortSignal, a request with nobody listening fails fast with `no_responders`, payloads above `maxPayload` fail
 * with `payload_too_large`, and handler errors never take the bus down.
 */
export interface Bus {
  readonly kind: 'nats' | 'memory';
  /** The largest payload a message may carry, in bytes. */
  readonly maxPayload: number;
  publish(subject: string, data: BusPayload, options?: PublishOptions): void;
  /**
   * Whether a message published on `subject` now would reach a subscription, for a publisher that can skip building
   * a message nobody receives. Only an in-process bus knows; a networked bus leaves it out.
   */
  hasSubscribers?(subject: string): boolean;
  subscribe(subject: string, handler: MessageHandler, options?: SubscribeOptions): Subscription;
  request(subject: string, data: BusPayload, options?: RequestOptions): Promise<BusMessage>;
  /**
   * {@link request} with a callback instead of a promise: `settled` gets the reply, or the error `request` would
   * reject with, once, and a reply in the turn it arrives, with no promise step. Optional: without it, `request`.
   */
  requestCallback?(
    subject: string,
    data: BusPayload,
    options: RequestOptions,
    settled: (error: unknown, reply: BusMessage | undefined) => void,
  ): void;
  /** Answers a message that has a reply subject. */
  respond(msg: BusMessage, data: BusPayload, options?: { headers?: BusHeaders }): boolean;
  /**
   * An in-process bus only: {@link request} with a JSON body given as a value, which reaches a single receiver as
   * {@link BusMessage.value} without being encoded and decoded (other receivers get its JSON text). The value is
   * handed over as it is, neither copied nor checked: the sender makes it for this message as plain JSON data
   * within {@link maxPayload}, sharing no part with anyone (`jsonCopy` makes such a value, or says it cannot: send
   * the JSON text then).
   */
  requestValue?(subject: string, value: unknown, options?: RequestOptions): Promise<BusMessage>;
  /**
   * An in-process bus only: {@link respond} with a JSON body handed over as a value, on the terms of
   * {@link requestValue}.
   */
  respondValue?(msg: BusMessage, value: unknown, options?: { headers?: BusHeaders }): boolean;
  /** Resolves once everything published so far reached the server. */
  flush(): Promise<void>;
  /** Lets subscriptions finish in-flight messages, then closes. */
  drain(): Promise<void>;
  close(): Promise<void>;
  /** Subscribes to connection state changes; returns an unsubscribe function. */
  onStatus(listener: (status: BusStatus) => void): () => void;
  /** A unique inbox subject for replies. */
  createInbox(): string;
}
