import { DeliverPolicy, DiscardPolicy, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import type { JetStreamClient, JetStreamManager, StoredMsg } from '@nats-io/jetstream';
import { AgentMeshError, ErrorCode } from '../errors.js';
import type { BusHeaders } from '../bus/types.js';
import { ensureStream } from './nats-assets.js';
import { fromNatsHeaders, toNatsHeaders } from './nats-queue.js';
import type { EventFollower, EventLog, EventLogOptions, LoggedEvent } from './types.js';

/** The header carrying an event's seq in the log (the body is opaque to the log). */
export const EVENT_SEQ_HEADER = 'Agentmesh-Event-Seq';
const ms = (n: number) => n * 1_000_000;
const MAX_CACHED_SUBJECTS = 10_000;
const REPLAY_GUARD_MS = 15_000;
/** The first event of a run is appended expecting an empty subject, without a lookup; a conflict looks it up. */
const EMPTY_TAIL = { seq: 0, streamSeq: 0 } as const;

function eventSeq(headers: BusHeaders | undefined, data: Uint8Array): number {
  const fromHeader = Number(headers?.[EVENT_SEQ_HEADER]);
  if (Number.isInteger(fromHeader) && fromHeader > 0) return fromHeader;
  const parsed = JSON.parse(new TextDecoder().decode(data)) as { seq?: unknown };
  return typeof parsed.seq === 'number' ? parsed.seq : 0;
}

/** True when `event` is event `seq` with exactly `data` (a retried append whose first try landed). */
export function sameBytes(event: LoggedEvent | undefined, seq: number, data: Uint8Array): boolean {
  return event?.seq === seq && Buffer.from(event.data).equals(Buffer.from(data));
}

function conflict(subject: string, seq: number, lastSeq: number): AgentMeshError {
  return new AgentMeshError(
    ErrorCode.Conflict,
    `event ${seq} of ${subject} does not follow the last stored event ${lastSeq}`,
    { retryable: false, details: { subject, seq, last_seq: lastSeq } },
  );
}

/**
 * The run event log on JetStream: a limits stream over every run's events subject. Appends carry the expected last
 * subject sequence, so concurrent or stale writers cannot leave a gap or a duplicate.
 */
export class NatsEventLog implements EventLog {
  /** The event seq and stream seq of the last event this process appended, per subject. */
  private readonly tails = new Map<string, { seq: number; streamSeq: number }>();

  private constructor(
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly stream: string,
  ) {}

  static async open(
    js: JetStreamClient,
    jsm: JetStreamManager,
    options: EventLogOptions & { replicas: number; enforceReplicas?: boolean },
  ): Promise<NatsEventLog> {
    const maxAgeMs = options.maxAgeMs ?? 7 * 24 * 3_600_000;
    await ensureStream(
      jsm,
      {
        name: options.stream,
        subjects: [options.subjects],
        retention: RetentionPolicy.Limits,
        storage: StorageType.File,
        discard: DiscardPolicy.Old,
        max_age: ms(maxAgeMs),
        duplicate_window: ms(Math.min(2 * 60_000, maxAgeMs)),
        num_replicas: options.replicas,
      },
      { enforceReplicas: options.enforceReplicas ?? true },
    );
    return new NatsEventLog(js, jsm, options.stream);
  }

  async append(subject: string, seq: number, data: Uint8Array, options: { headers?: BusHeaders } = {}) {
    for (let attempt = 1; ; attempt++) {
      const cached = this.tails.has(subject);
      const tail =
        attempt === 1 && seq === 1 ? (this.tails.get(subject) ?? EMPTY_TAIL) : await this.tail(subject);
      // another process may have appended since this one did (the fair intake stores a run's first events, the
      // planner that starts it the rest): a remembered tail that does not fit is read again from the log
      if (cached && tail.seq !== seq - 1 && attempt === 1) {
        this.tails.delete(subject);
        continue;
      }
      if (tail.seq >= seq) {
        if (sameBytes((await this.replay(subject, { fromSeq: seq }))[0], seq, data)) return;
        throw conflict(subject, seq, tail.seq);
      }
      if (tail.seq !== seq - 1) throw conflict(subject, seq, tail.seq);
      const headers = toNatsHeaders({ ...options.headers, [EVENT_SEQ_HEADER]: String(seq) })!;
      try {
        const ack = await this.js.publish(subject, data, {
          msgID: `${subject}:${seq}`,
          headers,
          expect: { lastSubjectSequence: tail.streamSeq },
          timeout: 5_000,
        });
        this.remember(subject, { seq, streamSeq: ack.seq });
        if (ack.duplicate && !sameBytes((await this.replay(subject, { fromSeq: seq }))[0], seq, data))
          throw conflict(subject, seq, seq);
        return;
      } catch (error) {
        this.tails.delete(subject);
        if (attempt >= 2 || !/wrong last sequence/i.test((error as Error).message)) throw error;
      }
    }
  }

  async replay(subject: string, options: { fromSeq?: number; signal?: AbortSignal } = {}) {
    const from = options.fromSeq ?? 1;
    const out: LoggedEvent[] = [];
    const last = await this.last(subject);
    if (last === undefined) return out;
    const consumer = await this.js.consumers.get(this.stream, {
      filter_subjects: subject,
      deliver_policy: DeliverPolicy.All,
    });
    const messages = await consumer.consume({ max_messages: 512 });
    const stop = () => messages.stop();
    options.signal?.addEventListener('abort', stop, { once: true });
    const guard = setTimeout(stop, REPLAY_GUARD_MS);
    let reached = 0;
    try {
      for await (const m of messages) {
        const seq = (reached = eventSeq(fromNatsHeaders(m.headers), m.data));
        if (seq >= from) out.push({ seq, data: m.data });
        if (seq >= last.seq) break;
      }
      if (reached < last.seq && options.signal?.aborted !== true)
        throw new AgentMeshError(
          ErrorCode.Unavailable,
          `replaying ${subject} stopped at event ${reached} of ${last.seq}: the server delivered no more within ${REPLAY_GUARD_MS} ms`,
          { retryable: true, details: { subject, reached, last: last.seq } },
        );
    } finally {
      clearTimeout(guard);
      options.signal?.removeEventListener('abort', stop);
      messages.stop();
      await consumer.delete().catch(() => undefined);
    }
    return out;
  }

  async last(subject: string): Promise<LoggedEvent | undefined> {
    const stored = await this.lastStored(subject);
    if (stored === undefined) return undefined;
    return { seq: eventSeq(fromNatsHeaders(stored.header), stored.data), data: stored.data };
  }

  async follow(
    subject: string,
    onEvent: (event: LoggedEvent) => void,
    options: { fromSeq?: number } = {},
  ): Promise<EventFollower> {
    let next = options.fromSeq ?? 1;
    const consumer = await this.js.consumers.get(this.stream, {
      filter_subjects: subject,
      deliver_policy: DeliverPolicy.All,
    });
    const messages = await consumer.consume();
    const done = (async () => {
      for await (const m of messages) {
        const seq = eventSeq(fromNatsHeaders(m.headers), m.data);
        if (seq < next) continue;
        next = seq + 1;
        onEvent({ seq, data: m.data });
      }
    })().catch(() => undefined);
    return {
      stop: async () => {
        messages.stop();
        await done;
        await consumer.delete().catch(() => undefined);
      },
    };
  }

  async followerCount(): Promise<number> {
    const info = await this.jsm.streams.info(this.stream);
    return info.state.consumer_count;
  }

  private async lastStored(subject: string): Promise<StoredMsg | undefined> {
    try {
      return (await this.jsm.streams.getMessage(this.stream, { last_by_subj: subject })) ?? undefined;
    } catch (error) {
      if (/no message found|not found/i.test((error as Error).message)) return undefined;
      throw error;
    }
  }

  private async tail(subject: string): Promise<{ seq: number; streamSeq: number }> {
    const known = this.tails.get(subject);
    if (known !== undefined) return known;
    const stored = await this.lastStored(subject);
    if (stored === undefined) return { seq: 0, streamSeq: 0 };
    return { seq: eventSeq(fromNatsHeaders(stored.header), stored.data), streamSeq: stored.seq };
  }

  private remember(subject: string, tail: { seq: number; streamSeq: number }): void {
    this.tails.delete(subject);
    this.tails.set(subject, tail);
    if (this.tails.size > MAX_CACHED_SUBJECTS) this.tails.delete(this.tails.keys().next().value!);
  }
}
