import {
  AgentMeshError,
  ErrorCode,
  RunEventSchema,
  TERMINAL_EVENT_TYPES,
  encodeJson,
  retry,
  sleep,
  subjects as buildSubjects,
  validate,
  type Backend,
  type EventLog,
  type Logger,
  type LoggedEvent,
  type RunEvent,
  type Subjects,
} from '@agentmesh/protocol';
import type { EventPublisher } from '../run/ports.js';

export type { EventPublisher } from '../run/ports.js';

const dec = new TextDecoder();

/** The subject table of each prefix, made once: a run's publisher needs one subject of it, not all of them again. */
const subjectTables = new Map<string, Subjects>();

function runEventsSubject(prefix: string, runId: string): string {
  let table = subjectTables.get(prefix);
  if (table === undefined) {
    if (subjectTables.size >= 64) subjectTables.clear();
    subjectTables.set(prefix, (table = buildSubjects(prefix)));
  }
  return table.runEvents(runId);
}

function parseEvent(e: LoggedEvent): RunEvent {
  return RunEventSchema.parse(JSON.parse(dec.decode(e.data)));
}

/** A publisher for a backend without an event log that outlives the process: plain bus messages. */
export function busPublisher(backend: Backend, prefix: string, runId: string): EventPublisher {
  const subject = runEventsSubject(prefix, runId);
  return {
    publish: (e) => {
      if (backend.hasSubscribers?.(subject) !== false) backend.publish(subject, encodeJson(e));
    },
    flush: async () => undefined,
    close: () => undefined,
  };
}

/**
 * Appends each event to the run's event log as event `seq`, one at a time and in order, retried until stored: the log
 * holds a gapless prefix of the run's events even across a server restart. A `conflict` (the log holds another event
 * at that seq: another planner wrote the run, or a stale write of a fenced one landed late) closes the publisher and
 * calls `onConflict`, so the run is handed over rather than finished with events missing from its log.
 */
export function logPublisher(
  log: () => EventLog | Promise<EventLog>,
  options: { prefix: string; runId: string; logger: Logger; onConflict?: (() => void) | undefined },
): EventPublisher {
  return new LogPublisher(log, options);
}

class LogPublisher implements EventPublisher {
  private readonly subject: string;
  private readonly queue: RunEvent[] = [];
  private closed = false;
  /** Ends a wait between attempts at close; made by the first wait (a publisher whose appends land never needs it). */
  private closing: AbortController | undefined;
  private pumping: Promise<void> | undefined;

  constructor(
    private readonly log: () => EventLog | Promise<EventLog>,
    private readonly options: {
      prefix: string;
      runId: string;
      logger: Logger;
      onConflict?: (() => void) | undefined;
    },
  ) {
    this.subject = runEventsSubject(options.prefix, options.runId);
  }

  // handed around detached (`publisher.publish`), as are flush and close: bound to this publisher
  readonly publish = (e: RunEvent): void => {
    if (this.closed) return;
    this.queue.push(e);
    this.start();
  };

  readonly flush = async (): Promise<void> => {
    while (this.pumping !== undefined) await this.pumping;
  };

  readonly close = (): void => {
    this.closed = true;
    this.closing?.abort();
    this.queue.length = 0;
  };

  /** An open log is appended to at once: the event leaves on the turn it is published. */
  private append(e: RunEvent): Promise<unknown> {
    if (this.closed)
      throw new AgentMeshError(ErrorCode.Cancelled, `the events of run ${this.options.runId} are closed`);
    const opened = this.log();
    const data = encodeJson(e);
    return opened instanceof Promise
      ? opened.then((l) => l.append(this.subject, e.seq, data))
      : opened.append(this.subject, e.seq, data);
  }

  private appendOne(e: RunEvent): Promise<void> {
    const { runId, logger } = this.options;
    return retry(() => this.append(e), {
      attempts: 120,
      baseMs: 50,
      capMs: 1_000,
      wait: (ms) =>
        this.closed ? Promise.resolve() : sleep(ms, (this.closing ??= new AbortController()).signal),
      retryable: (error) => !this.closed && error.code !== ErrorCode.Conflict,
      onRetry: (error, attempt) => {
        if (attempt === 1 || attempt % 10 === 0)
          logger.warn(
            { run_id: runId, seq: e.seq, attempt, err: error.message },
            'event append failed; retrying',
          );
      },
    }).then(
      () => undefined,
      (error: unknown) => {
        if (this.closed) return;
        const conflict = (error as AgentMeshError).code === ErrorCode.Conflict;
        logger.error(
          { run_id: runId, seq: e.seq, err: (error as Error).message },
          conflict
            ? 'event refused: the log has another event at this seq; publishing no more'
            : 'event not stored: giving up',
        );
        if (!conflict) return;
        this.close();
        this.options.onConflict?.();
      },
    );
  }

  private async pump(): Promise<void> {
    while (this.queue.length > 0 && !this.closed) {
      await this.appendOne(this.queue[0]!);
      this.queue.shift();
    }
  }

  private start(): void {
    this.pumping ??= this.pump().finally(() => {
      this.pumping = undefined;
      if (this.queue.length > 0 && !this.closed) this.start();
    });
  }
}

/** The last stored event of a run, or undefined. */
export async function lastLoggedEvent(log: EventLog, subject: string): Promise<RunEvent | undefined> {
  const last = await log.last(subject);
  return last === undefined ? undefined : parseEvent(last);
}

/** Every stored event of a run, in seq order. */
export async function loggedEvents(
  log: EventLog,
  subject: string,
  signal?: AbortSignal,
): Promise<RunEvent[]> {
  const stored = await log.replay(subject, signal === undefined ? {} : { signal });
  return stored.map(parseEvent);
}

/** Follows a run's stored and live events until its final event, which it returns. */
export async function followLoggedRun(
  log: EventLog,
  subject: string,
  options: {
    runId: string;
    onEvent?: ((event: RunEvent) => void) | undefined;
    signal?: AbortSignal | undefined;
  },
): Promise<RunEvent> {
  let settle!: { resolve: (e: RunEvent) => void; reject: (e: Error) => void };
  const final = new Promise<RunEvent>((resolve, reject) => (settle = { resolve, reject }));
  const follower = await log.follow(subject, (stored) => {
    try {
      const event = validate(RunEventSchema, JSON.parse(dec.decode(stored.data)), 'run event');
      options.onEvent?.(event);
      if (TERMINAL_EVENT_TYPES.has(event.type)) settle.resolve(event);
    } catch (error) {
      settle.reject(error as Error);
    }
  });
  const onAbort = () =>
    settle.reject(new AgentMeshError(ErrorCode.Cancelled, `stopped following run ${options.runId}`));
  if (options.signal?.aborted) onAbort();
  options.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    return await final;
  } finally {
    options.signal?.removeEventListener('abort', onAbort);
    await follower.stop();
  }
}
