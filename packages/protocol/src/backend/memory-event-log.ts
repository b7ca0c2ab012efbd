import { AgentMeshError, ErrorCode } from '../errors.js';
import type { Bus, BusHeaders } from '../bus/types.js';
import { sameBytes } from './nats-event-log.js';
import type { EventFollower, EventLog, LoggedEvent } from './types.js';

interface Stored extends LoggedEvent {
  at: number;
}

/** An in-process event log: per subject, events 1..N kept for `maxAgeMs`, appended events also published. */
export class MemoryEventLog implements EventLog {
  private readonly logs = new Map<string, Stored[]>();
  private readonly followers = new Map<string, Set<(e: LoggedEvent) => void>>();
  private open = 0;

  constructor(
    private readonly bus: Bus,
    private readonly maxAgeMs: number,
  ) {}

  async append(subject: string, seq: number, data: Uint8Array, options: { headers?: BusHeaders } = {}) {
    const log = this.logs.get(subject) ?? [];
    this.expire(subject, log);
    const lastSeq = log.at(-1)?.seq ?? 0;
    if (
      sameBytes(
        log.find((e) => e.seq === seq),
        seq,
        data,
      )
    )
      return;
    if (seq !== lastSeq + 1)
      throw new AgentMeshError(
        ErrorCode.Conflict,
        `event ${seq} of ${subject} does not follow the last stored event ${lastSeq}`,
        { retryable: false, details: { subject, seq, last_seq: lastSeq } },
      );
    const event: Stored = { seq, data: data.slice(), at: Date.now() };
    log.push(event);
    // the map stays in the order of each subject's latest append, so idle subjects expire from its front
    this.logs.delete(subject);
    this.logs.set(subject, log);
    this.expireIdle(event.at);
    for (const f of this.followers.get(subject) ?? []) f(event);
    this.bus.publish(subject, data, options.headers === undefined ? {} : { headers: options.headers });
  }

  async replay(subject: string, options: { fromSeq?: number } = {}): Promise<LoggedEvent[]> {
    const from = options.fromSeq ?? 1;
    return (this.logs.get(subject) ?? [])
      .filter((e) => e.seq >= from)
      .map(({ seq, data }) => ({ seq, data }));
  }

  async last(subject: string): Promise<LoggedEvent | undefined> {
    const e = this.logs.get(subject)?.at(-1);
    return e === undefined ? undefined : { seq: e.seq, data: e.data };
  }

  async follow(
    subject: string,
    onEvent: (event: LoggedEvent) => void,
    options: { fromSeq?: number } = {},
  ): Promise<EventFollower> {
    let next = options.fromSeq ?? 1;
    const deliver = (e: LoggedEvent) => {
      if (e.seq < next) return;
      next = e.seq + 1;
      onEvent({ seq: e.seq, data: e.data });
    };
    for (const e of await this.replay(subject, { fromSeq: next })) deliver(e);
    let set = this.followers.get(subject);
    if (set === undefined) this.followers.set(subject, (set = new Set()));
    set.add(deliver);
    this.open++;
    let stopped = false;
    return {
      stop: async () => {
        if (stopped) return;
        stopped = true;
        this.open--;
        set.delete(deliver);
        if (set.size === 0) this.followers.delete(subject);
      },
    };
  }

  async followerCount(): Promise<number> {
    return this.open;
  }

  /** Drops every subject whose newest event is past `maxAgeMs` (a finished run's log is never appended to again). */
  private expireIdle(now: number): void {
    if (this.maxAgeMs <= 0) return;
    const cutoff = now - this.maxAgeMs;
    for (const [subject, log] of this.logs) {
      if ((log.at(-1)?.at ?? -Infinity) >= cutoff) return;
      this.logs.delete(subject);
    }
  }

  private expire(subject: string, log: Stored[]): void {
    if (this.maxAgeMs <= 0) return;
    const cutoff = Date.now() - this.maxAgeMs;
    while (log.length > 0 && log[0]!.at < cutoff) log.shift();
    if (log.length === 0) this.logs.delete(subject);
  }
}
