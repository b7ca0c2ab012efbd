import { AckPolicy, DeliverPolicy, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import type {
  Consumer,
  ConsumerMessages,
  JetStreamClient,
  JetStreamManager,
  JsMsg,
  MsgRequest,
} from '@nats-io/jetstream';
import { headers as natsHeaders, type MsgHdrs } from '@nats-io/nats-core';
import type { BusHeaders } from '../bus/types.js';
import { AgentMeshError, ErrorCode } from '../errors.js';
import { ensureStream } from './nats-assets.js';
import type {
  WorkConsumer,
  WorkConsumerFacts,
  WorkConsumerOptions,
  WorkItem,
  WorkPull,
  WorkQueue,
  WorkQueueOptions,
  WorkRemoval,
} from './types.js';

const ms = (n: number) => n * 1_000_000;
/** The shortest pull the JetStream client accepts. */
const MIN_EXPIRES_MS = 1_000;

export function toNatsHeaders(record: BusHeaders | undefined): MsgHdrs | undefined {
  if (record === undefined) return undefined;
  const h = natsHeaders();
  for (const [k, v] of Object.entries(record)) h.set(k, v);
  return h;
}

export function fromNatsHeaders(h: MsgHdrs | undefined): BusHeaders | undefined {
  if (h === undefined) return undefined;
  const out: BusHeaders = {};
  for (const k of h.keys()) out[k] = h.get(k);
  return out;
}

/** The run intake on JetStream: a work-queue stream and durable pull consumers on it. */
export class NatsWorkQueue implements WorkQueue {
  private constructor(
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly options: WorkQueueOptions,
  ) {}

  static async open(
    js: JetStreamClient,
    jsm: JetStreamManager,
    options: WorkQueueOptions & { replicas: number; enforceReplicas?: boolean; maxMessageBytes: number },
  ): Promise<NatsWorkQueue> {
    await ensureStream(
      jsm,
      {
        name: options.stream,
        subjects: [options.subject, ...(options.moreSubjects ?? [])],
        retention: RetentionPolicy.Workqueue,
        storage: StorageType.File,
        duplicate_window: ms(options.duplicateWindowMs ?? 10 * 60_000),
        max_msg_size: options.maxMessageBytes,
        num_replicas: options.replicas,
      },
      { enforceReplicas: options.enforceReplicas ?? true },
    );
    return new NatsWorkQueue(js, jsm, options);
  }

  async submit(
    data: Uint8Array,
    options: { dedupeId: string; headers?: BusHeaders; timeoutMs?: number; subject?: string },
  ): Promise<{ seq: number; duplicate: boolean }> {
    const headers = toNatsHeaders(options.headers);
    const ack = await this.js.publish(options.subject ?? this.options.subject, data, {
      msgID: options.dedupeId,
      ...(headers === undefined ? {} : { headers }),
      ...(options.timeoutMs === undefined ? {} : { timeout: options.timeoutMs }),
    });
    return { seq: ack.seq, duplicate: ack.duplicate };
  }

  async consumer(name: string, options: WorkConsumerOptions): Promise<WorkConsumer> {
    const config = {
      durable_name: name,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: ms(options.ackWaitMs),
      max_ack_pending: options.maxAckPending || -1,
      filter_subject: options.filterSubject ?? this.options.subject,
    };
    try {
      await this.jsm.consumers.add(this.options.stream, config);
    } catch (error) {
      const info = await this.jsm.consumers.info(this.options.stream, name).catch(() => {
        throw error;
      });
      if (info.config.ack_wait !== config.ack_wait || info.config.max_ack_pending !== config.max_ack_pending)
        await this.jsm.consumers.update(this.options.stream, name, {
          ack_wait: config.ack_wait,
          max_ack_pending: config.max_ack_pending,
        });
    }
    return new NatsWorkConsumer(await this.js.consumers.get(this.options.stream, name));
  }

  async consumers(): Promise<WorkConsumerFacts[]> {
    const out: WorkConsumerFacts[] = [];
    for await (const c of this.jsm.consumers.list(this.options.stream))
      out.push({
        name: c.name,
        pending: c.num_pending,
        ackPending: c.num_ack_pending,
        redelivered: c.num_redelivered,
      });
    return out;
  }

  async remove(subject: string, options: WorkRemoval): Promise<boolean> {
    const { stream } = this.options;
    let seq = Math.max(1, options.fromSeq);
    for (let looks = 0; looks < options.maxLooks; looks++) {
      // the server answers the first message of `subject` from `seq` on (the client's types leave next_by_subj out)
      const query = { seq, next_by_subj: subject } as unknown as MsgRequest;
      const found = await this.jsm.streams.getMessage(stream, query);
      if (found === null) return false;
      const message = { seq: found.seq, data: found.data, headers: fromNatsHeaders(found.header) };
      if (found.subject === subject && found.seq >= seq && options.matches(message))
        return this.jsm.streams.deleteMessage(stream, found.seq, false);
      seq = found.seq + 1;
    }
    return false;
  }
}

class NatsWorkConsumer implements WorkConsumer {
  /** Ends the last pull (its one message came): at the next pull, or on the next turn of the event loop. */
  private endLastPull: (() => void) | undefined;

  constructor(private readonly consumer: Consumer) {}

  async next(options: { expiresMs: number; signal?: AbortSignal }): Promise<WorkItem | undefined> {
    // the last pull's unsubscribe goes out in the same write as this one's subscribe
    this.endLastPull?.();
    if (options.signal?.aborted) return undefined;
    const batch = await this.consumer.fetch({
      max_messages: 1,
      expires: Math.max(MIN_EXPIRES_MS, options.expiresMs),
    });
    const stop = () => batch.stop();
    options.signal?.addEventListener('abort', stop, { once: true });
    try {
      const first = await batch[Symbol.asyncIterator]().next();
      return first.done === true ? undefined : workItem(first.value);
    } finally {
      options.signal?.removeEventListener('abort', stop);
      // the pull ends after its one message anyway: its cleanup (unsubscribe, timers) waits until the delivery is on its way
      const later = setImmediate(stop);
      this.endLastPull = () => {
        this.endLastPull = undefined;
        clearImmediate(later);
        stop();
      };
    }
  }

  async pull(options: { expiresMs: number; signal?: AbortSignal }): Promise<WorkPull> {
    // max_messages 1: the client asks for the next message when the last one is taken from its iterator
    const messages = await this.consumer.consume({
      max_messages: 1,
      expires: Math.max(MIN_EXPIRES_MS, options.expiresMs),
      abort_on_missing_resource: true,
    });
    return new NatsWorkPull(messages, options.signal);
  }

  async counts(): Promise<{ pending: number; ackPending: number }> {
    const info = await this.consumer.info();
    return { pending: info.num_pending, ackPending: info.num_ack_pending };
  }
}

/**
 * One `consume` of the consumer, read through its iterator: the request for the next message leaves when the iterator
 * is asked for it (nats.js queues it behind the message it answers), so a pull not read holds no open request.
 */
class NatsWorkPull implements WorkPull {
  private readonly iterator: AsyncIterator<JsMsg>;
  private stopped = false;
  private readonly onAbort = () => this.stop();

  constructor(
    private readonly messages: ConsumerMessages,
    private readonly signal: AbortSignal | undefined,
  ) {
    this.iterator = messages[Symbol.asyncIterator]();
    if (signal?.aborted === true) this.stop();
    else signal?.addEventListener('abort', this.onAbort, { once: true });
    void this.endOnMissedHeartbeats();
  }

  /**
   * nats.js renews a consume that misses the server's heartbeats on its own, quietly; a fetch failed then. The pull
   * fails as the fetch did, so its taker logs it and starts a new one after its backoff.
   */
  private async endOnMissedHeartbeats(): Promise<void> {
    for await (const s of this.messages.status())
      if (s.type === 'heartbeats_missed')
        return this.messages.stop(pullEnded(`missed ${s.count} heartbeats`));
  }

  async next(): Promise<WorkItem | undefined> {
    if (this.stopped) return undefined;
    const { done, value } = await this.iterator.next().catch((error: unknown) => {
      this.stop();
      throw error;
    });
    if (done === true) {
      if (this.stopped) return undefined;
      this.stop();
      throw pullEnded('ended (connection closed)');
    }
    if (!this.stopped) return workItem(value);
    value.nak();
    return undefined;
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.signal?.removeEventListener('abort', this.onAbort);
    this.messages.stop();
    void this.giveBack();
  }

  /** Messages that came before the server saw the stop: the iterator yields them, then ends. */
  private async giveBack(): Promise<void> {
    try {
      for (let r = await this.iterator.next(); r.done !== true; r = await this.iterator.next()) r.value.nak();
    } catch {
      // the pull ended with an error: nothing more comes
    }
  }
}

const pullEnded = (why: string) =>
  new AgentMeshError(ErrorCode.Unavailable, `the work queue pull ${why}`, { retryable: true });

function workItem(m: JsMsg): WorkItem {
  return {
    seq: m.info.streamSequence,
    data: m.data,
    headers: fromNatsHeaders(m.headers),
    deliveries: m.info.deliveryCount,
    text: () => m.string(),
    ack: async () => {
      if (!(await m.ackAck().catch(() => false))) m.ack();
    },
    nak: (delayMs?: number) => m.nak(delayMs),
    term: () => m.term(),
    working: () => m.working(),
  };
}
