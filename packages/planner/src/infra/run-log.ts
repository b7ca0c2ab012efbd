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
  const { runId, logger } = options;
  const subject = runEventsSubject(options.prefix, runId);
  const queue: RunEvent[] = [];
  let closed = false;
  // ends a wait between attempts at close; made by the first wait (a publisher whose appends land never needs it)
  let closing: AbortController | undefined;
  let pumping: Promise<void> | undefined;
  // an open log is appended to at once: the event leaves on the turn it is published
  const append = (e: RunEvent) => {
    if (closed) throw new AgentMeshError(ErrorCode.Cancelled, `the events of run ${runId} are closed`);
    const opened = log();
    const data = encodeJson(e);
    return opened instanceof Promise
      ? opened.then((l) => l.append(subject, e.seq, data))
      : opened.append(subject, e.seq, data);
  };
  const appendOne = (e: RunEvent) =>
    retry(() => append(e), {
      attempts: 120,
      baseMs: 50,
      capMs: 1_000,
      wait: (ms) => (closed ? Promise.resolve() : sleep(ms, (closing ??= new AbortController()).signal)),
      retryable: (error) => !closed && error.code !== ErrorCode.Conflict,
      onRetry: (error, attempt) => {
        if (attempt === 1 || attempt % 10 === 0)
          logger.warn(
            { run_id: runId, seq: e.seq, attempt, err: error.message },
            'event append failed; retrying',
          );
      },
    }).catch((error: unknown) => {
      if (closed) return;
      const conflict = (error as AgentMeshError).code === ErrorCode.Conflict;
      logger.error(
        { run_id: runId, seq: e.seq, err: (error as Error).message },
        conflict
          ? 'event refused: the log has another event at this seq; publishing no more'
          : 'event not stored: giving up',
      );
      if (!conflict) return;
      close();
      options.onConflict?.();
    });
  const pump = async () => {
    while (queue.length > 0 && !closed) {
      await appendOne(queue[0]!);
      queue.shift();
    }
  };
  const start = () => {
    pumping ??= pump().finally(() => {
      pumping = undefined;
      if (queue.length > 0 && !closed) start();
    });
  };
  const close = () => {
    closed = true;
    closing?.abort();
    queue.length = 0;
  };
  return {
    publish: (e) => {
      if (closed) return;
      queue.push(e);
      start();
    },
    flush: async () => {
      while (pumping !== undefined) await pumping;
    },
    close,
  };
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
