import { subjectMatches } from '../bus/shared.js';
import type { BusHeaders } from '../bus/types.js';
import type {
  WorkConsumer,
  WorkConsumerFacts,
  WorkConsumerOptions,
  WorkItem,
  WorkPull,
  WorkQueue,
  WorkRemoval,
} from './types.js';

interface QueuedMessage {
  seq: number;
  subject: string;
  data: Uint8Array;
  headers: BusHeaders | undefined;
  deliveries: number;
  /** Not delivered before this time (nak with a delay). */
  notBefore: number;
  /** Delivered and waiting for its ack until this time; 0 when not delivered. */
  ackDeadline: number;
}

const dec = new TextDecoder();

/** An in-process work queue with the JetStream work-queue semantics the run intake relies on. */
export class MemoryWorkQueue implements WorkQueue {
  private seq = 0;
  private readonly messages = new Map<number, QueuedMessage>();
  private readonly dedupe = new Map<string, { seq: number; at: number }>();
  private readonly waiters = new Set<() => void>();
  private readonly consumers_ = new Map<string, MemoryWorkConsumer>();

  constructor(
    private readonly duplicateWindowMs: number,
    private readonly subject = 'submit',
  ) {}

  async submit(
    data: Uint8Array,
    options: { dedupeId: string; headers?: BusHeaders; subject?: string },
  ): Promise<{ seq: number; duplicate: boolean }> {
    const now = Date.now();
    for (const [id, at] of this.dedupe) {
      if (now - at.at < this.duplicateWindowMs) break;
      this.dedupe.delete(id);
    }
    const seen = this.dedupe.get(options.dedupeId);
    if (seen !== undefined) return { seq: seen.seq, duplicate: true };
    const seq = ++this.seq;
    this.dedupe.set(options.dedupeId, { seq, at: now });
    this.messages.set(seq, {
      seq,
      subject: options.subject ?? this.subject,
      data: data.slice(),
      headers: options.headers === undefined ? undefined : { ...options.headers },
      deliveries: 0,
      notBefore: 0,
      ackDeadline: 0,
    });
    this.wake();
    return { seq, duplicate: false };
  }

  async consumer(name: string, options: WorkConsumerOptions): Promise<WorkConsumer> {
    let consumer = this.consumers_.get(name);
    if (consumer === undefined)
      this.consumers_.set(
        name,
        (consumer = new MemoryWorkConsumer(this, options.filterSubject ?? this.subject)),
      );
    consumer.ackWaitMs = options.ackWaitMs;
    consumer.maxAckPending = options.maxAckPending || Infinity;
    return consumer;
  }

  async consumers(): Promise<WorkConsumerFacts[]> {
    return [...this.consumers_].map(([name, consumer]) => ({
      name,
      ...this.counts(consumer.filter),
      redelivered: 0,
    }));
  }

  async remove(subject: string, options: WorkRemoval): Promise<boolean> {
    let looks = 0;
    for (const m of this.messages.values()) {
      if (m.subject !== subject || m.seq < options.fromSeq) continue;
      if (looks++ >= options.maxLooks) return false;
      if (!options.matches({ seq: m.seq, data: m.data, headers: m.headers })) continue;
      this.messages.delete(m.seq);
      this.wake();
      return true;
    }
    return false;
  }

  /** The first message ready for delivery, or the time the next one becomes ready. */
  take(ackWaitMs: number, filter: string, maxAckPending = Infinity): QueuedMessage | number {
    if (this.counts(filter).ackPending >= maxAckPending) return Date.now() + 50;
    const now = Date.now();
    let soonest = Infinity;
    for (const m of this.messages.values()) {
      if (!subjectMatches(filter, m.subject)) continue;
      const readyAt = Math.max(m.notBefore, m.ackDeadline);
      if (readyAt <= now) {
        m.deliveries++;
        m.ackDeadline = now + ackWaitMs;
        return m;
      }
      soonest = Math.min(soonest, readyAt);
    }
    return soonest;
  }

  settle(
    m: QueuedMessage,
    how: { remove: true } | { remove: false; delayMs: number; ackWaitMs?: number },
  ): void {
    if (this.messages.get(m.seq) !== m) return;
    if (how.remove) this.messages.delete(m.seq);
    else if (how.ackWaitMs !== undefined) m.ackDeadline = Date.now() + how.ackWaitMs;
    else {
      m.ackDeadline = 0;
      m.notBefore = Date.now() + how.delayMs;
      this.wake();
    }
  }

  counts(filter: string): { pending: number; ackPending: number } {
    const now = Date.now();
    let ackPending = 0;
    let all = 0;
    for (const m of this.messages.values()) {
      if (!subjectMatches(filter, m.subject)) continue;
      all++;
      if (m.ackDeadline > now) ackPending++;
    }
    return { pending: all - ackPending, ackPending };
  }

  onChange(wake: () => void): () => void {
    this.waiters.add(wake);
    return () => this.waiters.delete(wake);
  }

  private wake(): void {
    for (const w of [...this.waiters]) w();
  }
}

class MemoryWorkConsumer implements WorkConsumer {
  ackWaitMs = 30_000;
  maxAckPending = Infinity;
  constructor(
    private readonly queue: MemoryWorkQueue,
    readonly filter: string,
  ) {}

  async next(options: { expiresMs: number; signal?: AbortSignal }): Promise<WorkItem | undefined> {
    const deadline = Date.now() + options.expiresMs;
    while (options.signal?.aborted !== true) {
      const taken = this.queue.take(this.ackWaitMs, this.filter, this.maxAckPending);
      if (typeof taken !== 'number') return this.item(taken);
      const waitMs = Math.min(deadline, taken) - Date.now();
      if (Date.now() >= deadline) return undefined;
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          stopWaiting();
          options.signal?.removeEventListener('abort', done);
          resolve();
        };
        const timer = setTimeout(done, Math.max(1, waitMs));
        const stopWaiting = this.queue.onChange(done);
        options.signal?.addEventListener('abort', done, { once: true });
      });
    }
    return undefined;
  }

  async pull(options: { expiresMs: number; signal?: AbortSignal }): Promise<WorkPull> {
    const stopper = new AbortController();
    const stop = () => stopper.abort();
    if (options.signal?.aborted === true) stop();
    else options.signal?.addEventListener('abort', stop, { once: true });
    const { signal } = stopper;
    return {
      next: async () => {
        for (let item; !signal.aborted;) {
          if ((item = await this.next({ expiresMs: options.expiresMs, signal })) === undefined) continue;
          // taken as the pull stopped: given back, as NATS gives back what came before the server saw the stop
          if (!signal.aborted) return item;
          item.nak();
        }
        return undefined;
      },
      stop: () => {
        options.signal?.removeEventListener('abort', stop);
        stop();
      },
    };
  }

  async counts(): Promise<{ pending: number; ackPending: number }> {
    return this.queue.counts(this.filter);
  }

  private item(m: QueuedMessage): WorkItem {
    const queue = this.queue;
    const ackWaitMs = this.ackWaitMs;
    return {
      seq: m.seq,
      data: m.data,
      headers: m.headers,
      deliveries: m.deliveries,
      text: () => dec.decode(m.data),
      ack: async () => queue.settle(m, { remove: true }),
      nak: (delayMs = 0) => queue.settle(m, { remove: false, delayMs }),
      term: () => queue.settle(m, { remove: true }),
      working: () => queue.settle(m, { remove: false, delayMs: 0, ackWaitMs }),
    };
  }
}
