/**
 * The planner's one door to infrastructure: the run intake, the event log, the run-record and checkpoint KV
 * buckets and the transcript blob store, all through the {@link Backend}. Everything else in the planner talks to
 * the narrow interfaces below. What differs between backends is data (`backend.durable`), never the type of the
 * backend: a durable backend has a work-queue intake and an event log that outlive the process.
 */
import {
  AgentMeshError,
  DEFAULT_PREFIX,
  ErrorCode,
  RunEventSchema,
  TERMINAL_EVENT_TYPES,
  createEnvelope,
  encodeJson,
  envelopeToHeaders,
  openRunEventLog,
  openRunIntake,
  requestJson,
  subjects as buildSubjects,
  validate,
  type Backend,
  type BlobStore,
  type EventLog,
  type KvStore,
  type Logger,
  type RunEvent,
  type RunRequestInput,
  type WorkQueue,
} from '@agentmesh/protocol';
import { z } from 'zod';
import {
  startBusIntake,
  startQueueIntake,
  type IntakeDelivery,
  type IntakeOptions,
  type Settlement,
} from './intake-queue.js';
import {
  busPublisher,
  followLoggedRun,
  lastLoggedEvent,
  logPublisher,
  loggedEvents,
  type EventPublisher,
} from './run-log.js';

export type { EventPublisher, IntakeDelivery, IntakeOptions, Settlement };

const WEEK_MS = 7 * 24 * 3_600_000;
/** How many bytes of transcripts an in-process planner keeps (the oldest go first): a long-lived process stays bounded. */
const MEMORY_TRANSCRIPT_BYTES = 256 * 1024 * 1024;

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
  return bus.kv(runsBucket(prefix), { ttlMs: WEEK_MS });
}

export function openTranscriptStore(bus: Backend, prefix: string = DEFAULT_PREFIX): Promise<BlobStore> {
  return bus.blobs(transcriptsBucket(prefix), { ttlMs: WEEK_MS, memoryMaxBytes: MEMORY_TRANSCRIPT_BYTES });
}

/** The KV bucket of approvals, pending and decided (`agentmesh_approvals` for the default prefix). */
export function approvalsBucket(prefix: string = DEFAULT_PREFIX): string {
  return `${bucketPrefix(prefix)}_approvals`;
}

export function openApprovals(bus: Backend, prefix: string = DEFAULT_PREFIX): Promise<KvStore> {
  return bus.kv(approvalsBucket(prefix), { ttlMs: WEEK_MS });
}

/** The KV bucket of input and pause requests waiting for their runs (`agentmesh_controls`). */
export function controlsBucket(prefix: string = DEFAULT_PREFIX): string {
  return `${bucketPrefix(prefix)}_controls`;
}

export function openRunControls(bus: Backend, prefix: string = DEFAULT_PREFIX): Promise<KvStore> {
  return bus.kv(controlsBucket(prefix), { ttlMs: WEEK_MS });
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
    blobs: await bus.blobs(sessionsBucket(prefix)),
    meta: await bus.kv(sessionIndexBucket(prefix)),
  };
}

/** The KV bucket of the runs bounded tenants have waiting (`agentmesh_tenant_waiting`). */
export function tenantWaitingBucket(prefix: string = DEFAULT_PREFIX): string {
  return `${bucketPrefix(prefix)}_tenant_waiting`;
}

export function openTenantWaiting(bus: Backend, prefix: string = DEFAULT_PREFIX): Promise<KvStore> {
  return bus.kv(tenantWaitingBucket(prefix));
}

export function openCheckpoints(bus: Backend, prefix: string, ttlMs: number): Promise<KvStore> {
  return bus.kv(checkpointsBucket(prefix), { ttlMs });
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
  /** The durable run intake (work queue): the fair intake's tenant queues live in it too. */
  runQueue(): Promise<WorkQueue>;
  /** Starts taking run requests; the returned function stops taking them. */
  startIntake(options: IntakeOptions): Promise<() => Promise<void>>;
  eventPublisher(runId: string, options?: { onConflict?: () => void }): EventPublisher;
  lastStoredEvent(runId: string): Promise<RunEvent | undefined>;
  readRunEvents(runId: string): Promise<RunEvent[]>;
}

/** Opens a backend asset once, on first use; a failed open is tried again on the next use. */
function once<T>(open: () => Promise<T>): () => Promise<T> {
  let opened: Promise<T> | undefined;
  return () => {
    opened ??= open().catch((error: unknown) => {
      opened = undefined;
      throw error;
    });
    return opened;
  };
}

/** {@link once}, handing out the asset itself once it is open (a caller then goes on without awaiting it). */
function onceOpen<T>(open: () => Promise<T>): { get: () => Promise<T>; now: () => T | Promise<T> } {
  let asset: T | undefined;
  const get = once(async () => (asset = await open()));
  return { get, now: () => asset ?? get() };
}

export function plannerInfra(backend: Backend, prefix: string, logger: Logger): PlannerInfra {
  const durable = backend.durable;
  const intake = once(() => openRunIntake(backend, prefix));
  const { get: log, now: openLog } = onceOpen(() => openRunEventLog(backend, prefix));
  const subject = (runId: string) => buildSubjects(prefix).runEvents(runId);
  return {
    durable,
    prepare: async () => {
      if (durable) await Promise.all([intake(), log()]);
    },
    runRecords: () => openRunRecords(backend, prefix),
    checkpoints: (ttlMs) => openCheckpoints(backend, prefix, ttlMs),
    transcripts: () => openTranscriptStore(backend, prefix),
    approvals: () => openApprovals(backend, prefix),
    controls: () => openRunControls(backend, prefix),
    runQueue: intake,
    startIntake: async (options) =>
      durable ? startQueueIntake(await intake(), logger, options) : startBusIntake(backend, prefix, options),
    eventPublisher: (runId, options) =>
      durable
        ? logPublisher(openLog, { prefix, runId, logger, onConflict: options?.onConflict })
        : busPublisher(backend, prefix, runId),
    lastStoredEvent: async (runId) => (durable ? lastLoggedEvent(await log(), subject(runId)) : undefined),
    readRunEvents: async (runId) => (durable ? loggedEvents(await log(), subject(runId)) : []),
  };
}

/** The last event stored in the event log for a run (durable backend), or undefined when there is none. */
export async function lastStoredEvent(
  bus: Backend,
  runId: string,
  prefix: string = DEFAULT_PREFIX,
): Promise<RunEvent | undefined> {
  if (!bus.durable) return undefined;
  return lastLoggedEvent(await clientLog(bus, prefix)(), buildSubjects(prefix).runEvents(runId));
}

/**
 * Every stored event of a run, in seq order (durable backend; an empty list elsewhere). Events of a resumed run are
 * included as stored: seq is gapless and increasing, and a `run.started` with `resumed: true` marks each takeover.
 */
export async function readRunEvents(
  bus: Backend,
  runId: string,
  options: { prefix?: string; signal?: AbortSignal } = {},
): Promise<RunEvent[]> {
  if (!bus.durable) return [];
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  const log = await clientLog(bus, prefix)();
  return loggedEvents(log, buildSubjects(prefix).runEvents(runId), options.signal);
}

/** Opened run intakes and event logs of a client backend, per prefix (handles, so a submit costs one request). */
interface ClientAssets {
  intake: Map<string, () => Promise<WorkQueue>>;
  log: Map<string, () => Promise<EventLog>>;
}
const clientAssets = new WeakMap<Backend, ClientAssets>();

function assetsOf(bus: Backend): ClientAssets {
  let assets = clientAssets.get(bus);
  if (assets === undefined) clientAssets.set(bus, (assets = { intake: new Map(), log: new Map() }));
  return assets;
}

function forgetClientAssets(bus: Backend, prefix: string): void {
  const assets = clientAssets.get(bus);
  assets?.intake.delete(prefix);
  assets?.log.delete(prefix);
}

function clientIntake(bus: Backend, prefix: string): () => Promise<WorkQueue> {
  const { intake } = assetsOf(bus);
  let open = intake.get(prefix);
  if (open === undefined) intake.set(prefix, (open = once(() => openRunIntake(bus, prefix))));
  return open;
}

function clientLog(bus: Backend, prefix: string): () => Promise<EventLog> {
  const { log } = assetsOf(bus);
  let open = log.get(prefix);
  if (open === undefined) log.set(prefix, (open = once(() => openRunEventLog(bus, prefix))));
  return open;
}

/** Puts a run request into the intake: the durable run queue (deduplicated by run id), or `runs.submit` in process. */
export async function publishRunRequest(
  bus: Backend,
  prefix: string,
  body: RunRequestInput & { id: string },
): Promise<{ run_id: string; seq?: number; duplicate?: boolean }> {
  if (!bus.durable) {
    const reply = await requestJson(
      bus,
      buildSubjects(prefix).runsSubmit,
      body,
      z.object({ run_id: z.string() }),
      {
        timeoutMs: 10_000,
      },
    );
    return { run_id: reply.run_id };
  }
  const identity = body.identity
    ? { ...body.identity, tenant: body.identity.tenant ?? 'default' }
    : undefined;
  const submit = async () =>
    (await clientIntake(bus, prefix)()).submit(encodeJson(body), {
      dedupeId: body.id,
      headers: envelopeToHeaders(createEnvelope(identity)),
    });
  const ack = await submit().catch((error: unknown) => {
    if (!/no responders|stream not found/i.test((error as Error).message)) throw error;
    forgetClientAssets(bus, prefix);
    return submit();
  });
  return { run_id: body.id, seq: ack.seq, duplicate: ack.duplicate };
}

/**
 * Hands a run's events to `onEvent` until its final event, which it returns. The durable event log is read from
 * the start (so it may be called after submitting); in process it subscribes, so call it before submitting.
 */
export async function followRunEvents(
  bus: Backend,
  runId: string,
  options: {
    prefix: string;
    onEvent?: ((event: RunEvent) => void) | undefined;
    signal?: AbortSignal | undefined;
  },
): Promise<RunEvent> {
  const subject = buildSubjects(options.prefix).runEvents(runId);
  if (bus.durable)
    return followLoggedRun(await clientLog(bus, options.prefix)(), subject, { ...options, runId });
  return new Promise((resolve, reject) => {
    const sub = bus.subscribe(subject, (msg) => {
      const event = validate(RunEventSchema, JSON.parse(msg.text()), 'run event');
      options.onEvent?.(event);
      if (!TERMINAL_EVENT_TYPES.has(event.type)) return;
      sub.unsubscribe();
      resolve(event);
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

/** The KV bucket of daemon trigger queues (`agentmesh_triggers` for the default prefix); entries are kept. */
export function triggersBucket(prefix: string = DEFAULT_PREFIX): string {
  return `${bucketPrefix(prefix)}_triggers`;
}

/** Opens the trigger bucket; `maxBytes` (the planner gives it) caps it, a reader leaves the limit as it is. */
export function openTriggerStore(
  bus: Backend,
  prefix: string = DEFAULT_PREFIX,
  options: { maxBytes?: number } = {},
): Promise<KvStore> {
  // a daemon skips a trigger it cannot see after a while: reads must not come from a replica still behind
  return bus.kv(triggersBucket(prefix), { ...options, consistentReads: true });
}
