/**
 * The planner's one door to infrastructure: the run intake, the event log, the run-record and checkpoint KV
 * buckets and the transcript blob store. Everything else in the planner talks to the narrow interfaces below, so
 * moving the planner onto another backend is a change of this file only. Nothing outside it imports
 * `@nats-io/*`, tests `instanceof NatsBus` or opens a store.
 */
import {
  AckPolicy,
  DeliverPolicy,
  type Consumer,
  type ConsumerMessages,
  type JsMsg,
} from '@nats-io/jetstream';
import {
  AgentMeshError,
  DEFAULT_PREFIX,
  ErrorCode,
  NatsBus,
  RunEventSchema,
  ServiceName,
  TERMINAL_EVENT_TYPES,
  backoffDelay,
  createEnvelope,
  encodeJson,
  ensureRunStreams,
  envelopeToNatsHeaders,
  openBlobStore,
  openKv,
  requestJson,
  respondError,
  respondJson,
  retry,
  sleep,
  streamNames,
  subjects as buildSubjects,
  validate,
  type BlobStore,
  type Backend,
  type BusMessage,
  type KvStore,
  type Logger,
  type RunEvent,
  type RunRequestInput,
} from '@agentmesh/protocol';
import { z } from 'zod';
import type { Semaphore } from '../util.js';

const WEEK_MS = 7 * 24 * 3_600_000;

function bucketPrefix(prefix: string): string {
  return prefix.replace(/[^A-Za-z0-9_-]/g, '_');
}

/** The object store that keeps run transcripts (`agentmesh_transcripts` for the default prefix). */
export function transcriptsBucket(prefix: string = DEFAULT_PREFIX): string {
  return `${bucketPrefix(prefix)}_transcripts`;
}

/** The KV bucket of run records: which run ids were seen, by which planner, and how they ended. */
export function runsBucket(prefix: string = DEFAULT_PREFIX): string {
  return `${bucketPrefix(prefix)}_runs`;
}

/** The KV bucket of run checkpoints (`agentmesh_checkpoints` for the default prefix), one key per run id. */
export function checkpointsBucket(prefix: string = DEFAULT_PREFIX): string {
  return `${bucketPrefix(prefix)}_checkpoints`;
}

export function openRunRecords(bus: Backend, prefix: string = DEFAULT_PREFIX): Promise<KvStore> {
  return openKv(bus, runsBucket(prefix), { ttlMs: WEEK_MS });
}

export function openTranscriptStore(bus: Backend, prefix: string = DEFAULT_PREFIX): Promise<BlobStore> {
  return openBlobStore(bus, transcriptsBucket(prefix), { ttlMs: WEEK_MS });
}

/** The KV bucket of approvals, pending and decided (`agentmesh_approvals` for the default prefix). */
export function approvalsBucket(prefix: string = DEFAULT_PREFIX): string {
  return `${bucketPrefix(prefix)}_approvals`;
}

export function openApprovals(bus: Backend, prefix: string = DEFAULT_PREFIX): Promise<KvStore> {
  return openKv(bus, approvalsBucket(prefix), { ttlMs: WEEK_MS });
}

/** The KV bucket of input and pause requests waiting for their runs (`agentmesh_controls`). */
export function controlsBucket(prefix: string = DEFAULT_PREFIX): string {
  return `${bucketPrefix(prefix)}_controls`;
}

export function openRunControls(bus: Backend, prefix: string = DEFAULT_PREFIX): Promise<KvStore> {
  return openKv(bus, controlsBucket(prefix), { ttlMs: WEEK_MS });
}

/** The object store of session transcripts (`agentmesh_sessions`). */
export function sessionsBucket(prefix: string = DEFAULT_PREFIX): string {
  return `${bucketPrefix(prefix)}_sessions`;
}

/** The KV bucket of the session index and session locks (`agentmesh_session_index`). */
export function sessionIndexBucket(prefix: string = DEFAULT_PREFIX): string {
  return `${bucketPrefix(prefix)}_session_index`;
}

/** Session transcripts (blobs) and their index and locks (KV), per tenant. */
export async function openSessionStores(
  bus: Backend,
  prefix: string = DEFAULT_PREFIX,
): Promise<{ blobs: BlobStore; meta: KvStore }> {
  return {
    blobs: await openBlobStore(bus, sessionsBucket(prefix)),
    meta: await openKv(bus, sessionIndexBucket(prefix)),
  };
}

export function openCheckpoints(bus: Backend, prefix: string, ttlMs: number): Promise<KvStore> {
  return openKv(bus, checkpointsBucket(prefix), { ttlMs });
}

/** What the planner does with an intake delivery once it has handled it. */
export type Settlement = { kind: 'ack' } | { kind: 'nak'; delayMs: number } | { kind: 'leave' };

/** One run request taken from the intake. */
export interface IntakeDelivery {
  readonly text: string;
  /** Envelope headers (identity), when the transport carries them. */
  readonly headers: Record<string, string> | undefined;
  /** The intake's sequence number (durable intake only). */
  readonly streamSeq: number | undefined;
  /** Tells the submitter the run is accepted (in-process intake answers `{ run_id }`). */
  accepted(runId: string): void;
  /** Tells the submitter the request is refused. */
  refused(error: AgentMeshError): void;
  /** Keeps the request from being redelivered while its run goes on. */
  working(): void;
  settle(settlement: Settlement): Promise<void>;
}

export interface IntakeOptions {
  slots: Semaphore;
  /** How long an unacknowledged request stays with this planner before it is redelivered. */
  leaseMs: number;
  onDelivery: (delivery: IntakeDelivery) => Promise<void>;
}

export interface EventPublisher {
  publish: (e: RunEvent) => void;
  flush: () => Promise<void>;
  /** Drops what is queued and publishes nothing more. */
  close: () => void;
}

/** The infrastructure one planner uses, behind one narrow interface. */
export interface PlannerInfra {
  /** True when the intake and event log are durable (runs get leases and checkpoints). */
  readonly durable: boolean;
  prepare(): Promise<void>;
  runRecords(): Promise<KvStore>;
  checkpoints(ttlMs: number): Promise<KvStore>;
  transcripts(): Promise<BlobStore>;
  /** The approvals bucket (pending and decided approvals of every run). */
  approvals(): Promise<KvStore>;
  /** The controls bucket (input and pause requests of every run). */
  controls(): Promise<KvStore>;
  /** Starts taking run requests; the returned function stops taking them. */
  startIntake(options: IntakeOptions): Promise<() => Promise<void>>;
  eventPublisher(runId: string): EventPublisher;
  lastStoredEvent(runId: string): Promise<RunEvent | undefined>;
  readRunEvents(runId: string): Promise<RunEvent[]>;
}

export function plannerInfra(bus: Backend, prefix: string, logger: Logger): PlannerInfra {
  const nats = bus instanceof NatsBus ? bus : undefined;
  return {
    durable: nats !== undefined,
    prepare: async () => {
      if (nats) await ensureRunStreams(nats, prefix);
    },
    runRecords: () => openRunRecords(bus, prefix),
    checkpoints: (ttlMs) => openCheckpoints(bus, prefix, ttlMs),
    transcripts: () => openTranscriptStore(bus, prefix),
    approvals: () => openApprovals(bus, prefix),
    controls: () => openRunControls(bus, prefix),
    startIntake: (options) =>
      nats ? startJetStreamIntake(nats, prefix, logger, options) : startMemoryIntake(bus, prefix, options),
    eventPublisher: (runId) =>
      nats ? jetStreamPublisher(nats, prefix, runId, logger) : memoryPublisher(bus, prefix, runId),
    lastStoredEvent: (runId) => lastStoredEvent(bus, runId, prefix),
    readRunEvents: (runId) => readRunEvents(bus, runId, { prefix }),
  };
}

function memoryPublisher(bus: Backend, prefix: string, runId: string): EventPublisher {
  const subject = buildSubjects(prefix).runEvents(runId);
  return {
    publish: (e) => bus.publish(subject, encodeJson(e)),
    flush: async () => undefined,
    close: () => undefined,
  };
}

/**
 * On NATS each event goes to JetStream with msg id `<run>:<seq>`, one at a time and in order, retried until stored:
 * the stream holds a gapless prefix of the run's events even across a server restart.
 */
function jetStreamPublisher(bus: NatsBus, prefix: string, runId: string, logger: Logger): EventPublisher {
  const subject = buildSubjects(prefix).runEvents(runId);
  const js = bus.jetstream();
  const queue: RunEvent[] = [];
  const closed = new AbortController();
  let pumping: Promise<void> | undefined;
  const publishOne = (e: RunEvent) =>
    retry(() => js.publish(subject, encodeJson(e), { msgID: `${runId}:${e.seq}`, timeout: 5_000 }), {
      attempts: 120,
      baseMs: 50,
      capMs: 1_000,
      signal: closed.signal,
      retryable: () => true,
      onRetry: (error, attempt) => {
        if (attempt === 1 || attempt % 10 === 0)
          logger.warn(
            { run_id: runId, seq: e.seq, attempt, err: error.message },
            'event publish failed; retrying',
          );
      },
    }).catch(() => {
      if (!closed.signal.aborted)
        logger.error({ run_id: runId, seq: e.seq }, 'event not published: giving up');
    });
  const pump = async () => {
    while (queue.length > 0 && !closed.signal.aborted) {
      await publishOne(queue[0]!);
      queue.shift();
    }
  };
  const start = () => {
    pumping ??= pump().finally(() => {
      pumping = undefined;
      if (queue.length > 0 && !closed.signal.aborted) start();
    });
  };
  return {
    publish: (e) => {
      if (closed.signal.aborted) return;
      queue.push(e);
      start();
    },
    flush: async () => {
      while (pumping !== undefined) await pumping;
    },
    close: () => {
      closed.abort();
      queue.length = 0;
    },
  };
}

async function startMemoryIntake(
  bus: Backend,
  prefix: string,
  options: IntakeOptions,
): Promise<() => Promise<void>> {
  let stopping = false;
  const sub = bus.subscribe(buildSubjects(prefix).runsSubmit, (msg: BusMessage) => {
    if (stopping) return;
    const delivery: IntakeDelivery = {
      text: msg.text(),
      headers: undefined,
      streamSeq: undefined,
      accepted: (runId) => {
        if (msg.reply !== undefined) respondJson(bus, msg, { run_id: runId });
      },
      refused: (error) => respondError(bus, msg, error),
      working: () => undefined,
      settle: async () => undefined,
    };
    void (async () => {
      const release = await options.slots.acquire();
      try {
        await options.onDelivery(delivery);
      } finally {
        release();
      }
    })();
  });
  return async () => {
    stopping = true;
    sub.unsubscribe();
  };
}

async function intakeConsumer(
  bus: NatsBus,
  prefix: string,
  leaseMs: number,
  logger: Logger,
): Promise<Consumer> {
  const names = await ensureRunStreams(bus, prefix);
  const jsm = await bus.jetstreamManager();
  const durable = ServiceName.Planner;
  const config = {
    durable_name: durable,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    ack_wait: leaseMs * 1_000_000,
    max_ack_pending: -1,
    filter_subject: buildSubjects(prefix).runsSubmit,
  };
  try {
    await jsm.consumers.add(names.runs, config);
  } catch (error) {
    const info = await jsm.consumers.info(names.runs, durable).catch(() => {
      throw error;
    });
    if (info.config.ack_wait !== config.ack_wait)
      await jsm.consumers
        .update(names.runs, durable, { ack_wait: config.ack_wait })
        .catch((e: unknown) =>
          logger.warn({ err: (e as Error).message }, 'could not update the intake ack_wait'),
        );
  }
  return bus.jetstream().consumers.get(names.runs, durable);
}

function jetStreamDelivery(m: JsMsg): IntakeDelivery {
  let headers: Record<string, string> | undefined;
  if (m.headers !== undefined) {
    headers = {};
    for (const key of m.headers.keys()) headers[key] = m.headers.get(key);
  }
  return {
    text: m.string(),
    headers,
    streamSeq: m.info.streamSequence,
    accepted: () => undefined,
    refused: () => undefined,
    working: () => m.working(),
    settle: async (s) => {
      if (s.kind === 'ack') await m.ackAck().catch(() => m.ack());
      else if (s.kind === 'nak') m.nak(s.delayMs);
    },
  };
}

async function startJetStreamIntake(
  bus: NatsBus,
  prefix: string,
  logger: Logger,
  options: IntakeOptions,
): Promise<() => Promise<void>> {
  const consumer = await intakeConsumer(bus, prefix, options.leaseMs, logger);
  let stopping = false;
  let current: ConsumerMessages | undefined;
  const loop = async () => {
    for (let failures = 0; !stopping;) {
      const release = await options.slots.acquire();
      if (stopping) {
        release();
        break;
      }
      let handed = false;
      try {
        current = await consumer.fetch({ max_messages: 1, expires: 2_000 });
        for await (const m of current) {
          handed = true;
          void options.onDelivery(jetStreamDelivery(m)).finally(release);
        }
        failures = 0;
      } catch (error) {
        if (!stopping) {
          logger.warn({ err: (error as Error).message }, 'run intake fetch failed; retrying');
          await sleep(backoffDelay(++failures, { baseMs: 500, capMs: 5_000 }));
        }
      } finally {
        current = undefined;
        if (!handed) release();
      }
    }
  };
  const running = loop();
  return async () => {
    stopping = true;
    current?.stop();
    await running.catch(() => undefined);
  };
}

/** The last event stored in the events stream for a run (durable event log), or undefined when there is none. */
export async function lastStoredEvent(
  bus: Backend,
  runId: string,
  prefix: string = DEFAULT_PREFIX,
): Promise<RunEvent | undefined> {
  if (!(bus instanceof NatsBus)) return undefined;
  const jsm = await bus.jetstreamManager();
  const stored = await jsm.streams
    .getMessage(streamNames(prefix).events, { last_by_subj: buildSubjects(prefix).runEvents(runId) })
    .catch((error: unknown) => {
      if (/no message found|not found/i.test((error as Error).message)) return null;
      throw error;
    });
  if (stored === null) return undefined;
  return RunEventSchema.parse(stored.json());
}

/**
 * Every stored event of a run, in stream order (NATS; an empty list elsewhere). Events replayed by a resumed
 * planner are included as stored: seq is gapless and increasing, and a `run.started` with `resumed: true` marks
 * each takeover.
 */
export async function readRunEvents(
  bus: Backend,
  runId: string,
  options: { prefix?: string; signal?: AbortSignal } = {},
): Promise<RunEvent[]> {
  if (!(bus instanceof NatsBus)) return [];
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  const last = await lastStoredEvent(bus, runId, prefix);
  if (last === undefined) return [];
  const consumer = await bus.jetstream().consumers.get(streamNames(prefix).events, {
    filter_subjects: buildSubjects(prefix).runEvents(runId),
    deliver_policy: DeliverPolicy.All,
  });
  const events: RunEvent[] = [];
  const messages = await consumer.consume({ max_messages: 512 });
  const onAbort = () => messages.stop();
  options.signal?.addEventListener('abort', onAbort, { once: true });
  const guard = setTimeout(() => messages.stop(), 15_000);
  try {
    for await (const m of messages) {
      events.push(RunEventSchema.parse(m.json()));
      if (m.info.pending === 0) break;
    }
  } finally {
    clearTimeout(guard);
    options.signal?.removeEventListener('abort', onAbort);
    messages.stop();
    await consumer.delete().catch(() => undefined);
  }
  return events;
}

/** Puts a run request into the intake: on NATS the runs stream (deduplicated by run id), in process `runs.submit`. */
export async function publishRunRequest(
  bus: Backend,
  prefix: string,
  body: RunRequestInput & { id: string },
): Promise<{ run_id: string; seq?: number; duplicate?: boolean }> {
  const s = buildSubjects(prefix);
  if (bus instanceof NatsBus) {
    const identity = body.identity
      ? { ...body.identity, tenant: body.identity.tenant ?? 'default' }
      : undefined;
    const ack = await bus.jetstream().publish(s.runsSubmit, encodeJson(body), {
      msgID: body.id,
      headers: envelopeToNatsHeaders(createEnvelope(identity)),
    });
    return { run_id: body.id, seq: ack.seq, duplicate: ack.duplicate };
  }
  const reply = await requestJson(bus, s.runsSubmit, body, z.object({ run_id: z.string() }), {
    timeoutMs: 10_000,
  });
  return { run_id: reply.run_id };
}

/**
 * Hands a run's events to `onEvent` until its final event, which it returns. The durable event log is read from
 * the start (so it may be called after submitting); in process it subscribes, so call it before submitting.
 */
export function followRunEvents(
  bus: Backend,
  runId: string,
  options: {
    prefix: string;
    onEvent?: ((event: RunEvent) => void) | undefined;
    signal?: AbortSignal | undefined;
  },
): Promise<RunEvent> {
  const subject = buildSubjects(options.prefix).runEvents(runId);
  const handle = (data: unknown): RunEvent | undefined => {
    const event = validate(RunEventSchema, data, 'run event');
    options.onEvent?.(event);
    return TERMINAL_EVENT_TYPES.has(event.type) ? event : undefined;
  };
  if (!(bus instanceof NatsBus)) {
    return new Promise((resolve, reject) => {
      const sub = bus.subscribe(subject, (msg) => {
        const final = handle(JSON.parse(msg.text()));
        if (final) {
          sub.unsubscribe();
          resolve(final);
        }
      });
      options.signal?.addEventListener(
        'abort',
        () => {
          sub.unsubscribe();
          reject(new AgentMeshError(ErrorCode.Cancelled, `stopped following run ${runId}`));
        },
        { once: true },
      );
    });
  }
  return (async () => {
    const consumer = await bus.jetstream().consumers.get(streamNames(options.prefix).events, {
      filter_subjects: subject,
    });
    const messages = await consumer.consume();
    const onAbort = () => messages.stop();
    options.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      for await (const m of messages) {
        const final = handle(m.json());
        if (final) return final;
      }
      throw new AgentMeshError(ErrorCode.Cancelled, `stopped following run ${runId} before its final event`);
    } finally {
      options.signal?.removeEventListener('abort', onAbort);
      messages.stop();
      // An ordered consumer outlives stop() for its 5 min inactivity threshold: delete it so followers don't pile up.
      await consumer.delete().catch(() => undefined);
    }
  })();
}
