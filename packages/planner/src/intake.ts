import { randomUUID } from 'node:crypto';
import {
  AgentMeshError,
  DEFAULT_TENANT,
  ErrorCode,
  FAST_CHECK_COMPILE_AFTER,
  RUN_ID_PATTERN,
  RunRequestSchema,
  deltasMakeText,
  describeZodError,
  encodeJson,
  envelopeFromHeaders,
  Header,
  isAgentMeshError,
  outputCheck,
  type KvStore,
  type Logger,
  type RunRequest,
  type ScriptedTurn,
  rememberRunTraceContext,
} from '@agentmesh/protocol';
import type { TenantQuotas } from './budgets/index.js';
import { QUEUED_AT_HEADER, type QueuedPlace } from './fair/fair-intake.js';
import type { IntakeDelivery, PlannerInfra, Settlement } from './infra/backend.js';
import { claimRecord } from './durable/keepers.js';
import { runRecord } from './model/record.js';
import { runDurably, type DurableDeps } from './durable/takeover.js';
import { RunEventSink, runAccepted, runFailed, runQueued } from './run/events.js';
import type { ExecuteOptions, RunExecutor, RunResult } from './run/executor.js';
import type { RunSnapshot } from './model/snapshot.js';

export type Admission =
  | { ok: true; request: RunRequest; runId: string }
  | { ok: false; raw: unknown; problems: string; runId: string };

export interface IntakeDeps {
  infra: PlannerInfra;
  executor: RunExecutor;
  plannerId: string;
  logger: Logger;
  /** How long a delivery stays with this planner unacknowledged (the heartbeat runs every third of it). */
  leaseMs: number;
  records: () => KvStore;
  /** Set when runs from the intake are durable (lease, checkpoints, takeover). */
  durable: () => DurableDeps | undefined;
  /** The provider and model a request resolves to, for `run.accepted` stored before the run starts. */
  describe?: (request: RunRequest) => { kind: string; model: string } | undefined;
  /** Per-tenant submit rate and daily budgets (fleets with `tenants:` configured). */
  quotas?: TenantQuotas | undefined;
}

/**
 * The single entry of runs into a planner, for embedded calls, the in-process `runs.submit` and the durable
 * intake alike: validate (an invalid request ends as `run.failed` with `invalid_request`), dedupe (a run id is run
 * once), accept, then hand the run to the executor, wrapped in durability when the intake is durable.
 */
export class RunIntake {
  /** Intake deliveries of the runs in progress here, by run id (a redelivery replaces the handle). */
  private readonly handling = new Map<string, { delivery: IntakeDelivery; tenant: string }>();
  /** The deliveries being handled, each told `working()` by one timer every third of the lease. */
  private readonly beating = new Set<{ delivery: IntakeDelivery }>();
  private beat: NodeJS.Timeout | undefined;

  constructor(private readonly deps: IntakeDeps) {}

  /** An embedded run: validated and run here; a run id seen before throws `conflict`. */
  async submit(raw: unknown, options: ExecuteOptions): Promise<RunResult> {
    const admission = admit(raw, `run-${randomUUID()}`);
    if (!admission.ok) return this.fail(admission.runId, invalidRequest(admission), options);
    const { request, runId } = admission;
    const refusal = await this.deps.quotas?.admit(request, runId, this.deps.records());
    if (refusal !== undefined) return this.fail(runId, refusal, options);
    const keeper = await claimRecord(this.deps.records(), { runId, plannerId: this.deps.plannerId, request });
    return this.deps.executor.run(request, runId, keeper, options);
  }

  /**
   * A run continued in this process from a checkpoint (a {@link RunSnapshot} handed to the checkpoint hook): the
   * loop goes on from the snapshot's phase and its events continue after the snapshot's seq, or after the last
   * stored event when the event log holds later ones (events published after the checkpoint was taken).
   */
  async resume(snapshot: RunSnapshot, options: ExecuteOptions): Promise<RunResult> {
    const parsed = RunRequestSchema.safeParse(snapshot.request);
    if (!parsed.success || snapshot.version !== 1 || snapshot.phase === 'finished')
      throw new AgentMeshError(
        ErrorCode.InvalidRequest,
        `run "${snapshot.run_id}" cannot be resumed: ${parsed.success ? `its checkpoint is ${snapshot.phase === 'finished' ? 'of a finished run' : `version ${String(snapshot.version)}`}` : describeZodError(parsed.error)}`,
        { retryable: false },
      );
    const { run_id: runId } = snapshot;
    const lastStored = await this.deps.infra.lastStoredEvent(runId);
    const keeper = await claimRecord(this.deps.records(), {
      runId,
      plannerId: this.deps.plannerId,
      request: parsed.data,
      resume: structuredClone(snapshot),
      lastStoredSeq: lastStored?.seq,
    });
    return this.deps.executor.run(parsed.data, runId, keeper, options);
  }

  /** A request from the intake (in-process `runs.submit` or the durable runs stream). */
  async deliver(delivery: IntakeDelivery): Promise<void> {
    let settlement: Settlement = { kind: 'ack' };
    const holder = { delivery, tenant: DEFAULT_TENANT };
    this.heartbeat(holder);
    let owned: string | undefined;
    try {
      const admission = this.admission(delivery);
      if (!admission.ok) {
        const error = invalidRequest(admission);
        delivery.refused(error);
        await this.refuseDelivered(admission.runId, error, delivery.streamSeq);
        return;
      }
      const { request, runId } = admission;
      const running = this.handling.get(runId);
      if (running !== undefined) {
        running.delivery = delivery;
        settlement = { kind: 'leave' };
        return;
      }
      // a run from a tenant's queue was counted against its rate when it was submitted; its budget is checked again.
      // Without quotas nothing is awaited: the run record's create leaves before the intake's next pull
      const outOfQuota =
        this.deps.quotas === undefined
          ? undefined
          : await this.checkQuota(delivery, request, runId, !queuedRun(delivery));
      if (outOfQuota !== undefined) {
        settlement = outOfQuota;
        return;
      }
      owned = runId;
      holder.tenant = request.identity?.tenant ?? DEFAULT_TENANT;
      this.handling.set(runId, holder);
      delivery.accepted(runId);
      settlement = await this.start(request, runId, delivery);
    } finally {
      this.beating.delete(holder);
      if (owned !== undefined) this.handling.delete(owned);
      await holder.delivery.settle(settlement);
    }
  }

  /**
   * Keeps a delivery from being redelivered while it is handled: `working()` at least every third of the lease. One
   * timer serves all deliveries (none is made on the path of each run); it stops at a tick that finds none.
   */
  private heartbeat(holder: { delivery: IntakeDelivery }): void {
    this.beating.add(holder);
    if (this.beat !== undefined) return;
    this.beat = setInterval(
      () => {
        if (this.beating.size === 0) {
          clearInterval(this.beat);
          this.beat = undefined;
        } else for (const h of this.beating) h.delivery.working();
      },
      Math.max(250, Math.floor(this.deps.leaseMs / 3)),
    );
    this.beat.unref?.();
  }

  /** Validates a delivered request: the request and its run id, or what is wrong and the id to report it under. */
  admission(delivery: Pick<IntakeDelivery, 'text' | 'headers' | 'streamSeq'>): Admission {
    const fallbackId =
      delivery.streamSeq === undefined ? `run-${randomUUID()}` : `run-seq-${delivery.streamSeq}`;
    return admit(parseText(delivery.text), fallbackId, delivery.headers);
  }

  /**
   * Refuses a delivered request with `error` (e.g. `queue_full`): a `run.failed` carrying its code on the run's
   * events, recorded once so a redelivery is not reported twice, and the delivery acked.
   */
  async refuse(delivery: IntakeDelivery, runId: string, error: AgentMeshError): Promise<void> {
    delivery.refused(error);
    await this.refuseDelivered(runId, error, delivery.streamSeq);
    await delivery.settle({ kind: 'ack' });
  }

  /**
   * Stores `run.accepted` and `run.queued` for a run that waits in the fair intake and returns the seq of the
   * run's last stored event; a redelivered request finds its events stored and stores none again.
   */
  async storeQueued(runId: string, request: RunRequest, queued: QueuedPlace): Promise<number> {
    if (queued.redelivered) {
      const last = await this.deps.infra.lastStoredEvent(runId);
      if (last !== undefined) return last.seq;
    }
    const publisher = this.deps.infra.eventPublisher(runId);
    const sink = new RunEventSink(runId, publisher.publish);
    sink.emit(runAccepted(request, this.deps.describe?.(request)));
    sink.emit(runQueued(queued));
    await publisher.flush();
    return sink.lastSeq;
  }

  /** Runs in progress in this planner, by tenant. */
  runningByTenant(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const { tenant } of this.handling.values()) counts.set(tenant, (counts.get(tenant) ?? 0) + 1);
    return counts;
  }

  private async start(request: RunRequest, runId: string, delivery: IntakeDelivery): Promise<Settlement> {
    const durable = this.deps.durable();
    const { executor, plannerId } = this.deps;
    const { streamSeq, queuedSeq } = delivery;
    if (durable !== undefined && streamSeq !== undefined)
      return runDurably(durable, request, { runId, streamSeq, queuedSeq }, (keeper) =>
        executor.run(request, runId, keeper),
      );
    try {
      const keeper = await claimRecord(this.deps.records(), { runId, plannerId, request, streamSeq });
      await executor.run(request, runId, keeper);
    } catch (error) {
      if (isAgentMeshError(error, ErrorCode.Conflict))
        this.deps.logger.info({ run_id: runId }, 'duplicate run id: not run again');
      else this.deps.logger.error({ run_id: runId, err: (error as Error).message }, 'run could not start');
    }
    return { kind: 'ack' };
  }

  /**
   * The tenant's submit rate and budget (fleets with `tenants:`): undefined when the run may start; after a refusal
   * (ended with `run.failed`) an ack; when they could not be counted (the bucket is unreachable), a nak, so the
   * request comes back rather than being lost.
   */
  async checkQuota(delivery: IntakeDelivery, request: RunRequest, runId: string, countSubmission = true) {
    const { quotas, logger } = this.deps;
    if (quotas === undefined) return undefined;
    try {
      const refusal = await quotas.admit(request, runId, this.deps.records(), { countSubmission });
      if (refusal === undefined) return undefined;
      delivery.refused(refusal);
      await this.refuseDelivered(runId, refusal, delivery.streamSeq);
      return { kind: 'ack' } as const;
    } catch (error) {
      logger.warn(
        { run_id: runId, err: (error as Error).message },
        'tenant limits not checked: run sent back',
      );
      delivery.refused(AgentMeshError.from(error));
      return { kind: 'nak', delayMs: 1_000 } as const;
    }
  }

  /** A refused request from the durable intake is recorded once, so a redelivery is not reported twice. */
  private async refuseDelivered(runId: string, error: AgentMeshError, streamSeq: number | undefined) {
    if (streamSeq !== undefined) {
      const record = runRecord({
        run_id: runId,
        planner_id: this.deps.plannerId,
        stream_seq: streamSeq,
      });
      try {
        await this.deps.records().create(runId, encodeJson(record));
      } catch {
        return;
      }
    }
    await this.fail(runId, error, {});
    if (streamSeq !== undefined) {
      const finished = runRecord({ run_id: runId, planner_id: this.deps.plannerId, status: error.code });
      await this.deps
        .records()
        .put(runId, encodeJson(finished))
        .catch(() => undefined);
    }
  }

  private failInvalid(
    admission: Extract<Admission, { ok: false }>,
    options: ExecuteOptions,
  ): Promise<RunResult> {
    return this.fail(admission.runId, invalidRequest(admission), options);
  }

  /** Ends a run that was refused before it started (invalid, rate limited, over budget) with `run.failed`. */
  private async fail(runId: string, error: AgentMeshError, options: ExecuteOptions): Promise<RunResult> {
    const publisher = this.deps.infra.eventPublisher(runId);
    const sink = new RunEventSink(runId, publisher.publish, { onEvent: options.onEvent });
    const event = sink.emit(runFailed(error, error));
    await publisher.flush();
    this.deps.logger.warn({ run_id: runId, code: error.code, err: error.message }, 'run refused');
    return event;
  }
}

function invalidRequest(admission: Extract<Admission, { ok: false }>): AgentMeshError {
  return new AgentMeshError(ErrorCode.InvalidRequest, `invalid run request: ${admission.problems}`, {
    retryable: false,
  });
}

class NotJson {
  constructor(readonly message: string) {}
}

function parseText(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    return new NotJson((error as Error).message);
  }
}

/** What zod accepts as a finished request, compiled once asked often enough (a planner is a long-lived server). */
const finishedRunRequest = outputCheck(RunRequestSchema, { after: FAST_CHECK_COMPILE_AFTER });

/**
 * The fields whose zod schemas JSON Schema states in full (no refinement, format, trim or record key rule): a
 * request of these alone that passes the compiled check is what zod would return, once its task is trimmed already
 * and its scripted turns' deltas add up to their text.
 */
const PLAIN_REQUEST_FIELDS = new Set([
  'id',
  'task',
  'system',
  'provider',
  'model',
  'tools',
  'tool_search',
  'deferred',
  'always',
  'limits',
  'identity',
  'priority',
  'require_successful_tools',
  'stop_after_successful_tools',
  'tool_retries',
  'tool_protocol',
  'session',
  'parent',
  'skills',
  'script',
]);

function isPlainRequest(raw: Record<string, unknown>): boolean {
  for (const key in raw) if (!PLAIN_REQUEST_FIELDS.has(key)) return false;
  const task = raw['task'];
  if (typeof task !== 'string' || task !== task.trim()) return false;
  const script = raw['script'] as ScriptedTurn[] | undefined;
  return script === undefined || script.every(deltasMakeText);
}

/**
 * Parses a request as zod does, in a fraction of its time on the path of every run: a plain request (above) that
 * passes the compiled check is taken as it is; any other goes through zod.
 */
export function parseRunRequest(raw: unknown): ReturnType<typeof RunRequestSchema.safeParse> {
  if (finishedRunRequest(raw) && isPlainRequest(raw as Record<string, unknown>))
    return { success: true, data: raw as RunRequest };
  return RunRequestSchema.safeParse(raw);
}

/** Validates a request: the request and its run id, or what is wrong with it and the id to report it under. */
function admit(raw: unknown, fallbackId: string, headers?: Record<string, string>): Admission {
  if (raw instanceof NotJson)
    return { ok: false, raw: undefined, problems: `not valid JSON: ${raw.message}`, runId: fallbackId };
  const parsed = parseRunRequest(raw);
  if (!parsed.success) {
    const rawId = raw !== null && typeof raw === 'object' ? (raw as { id?: unknown }).id : undefined;
    const runId = typeof rawId === 'string' && RUN_ID_PATTERN.test(rawId) ? rawId : fallbackId;
    return { ok: false, raw, problems: describeZodError(parsed.error), runId };
  }
  const request = withEnvelopeIdentity(parsed.data, headers);
  const runId = request.id ?? fallbackId;
  rememberRunTraceContext(runId, headers);
  return { ok: true, request, runId };
}

/**
 * A run request without `identity` takes the identity of its envelope headers (`am-tenant`, `am-user`,
 * `am-session`), so clients that put identity in headers are scoped the same way.
 */
function withEnvelopeIdentity(request: RunRequest, headers: Record<string, string> | undefined): RunRequest {
  // an envelope gives an identity only with a tenant
  if (request.identity !== undefined || headers?.[Header.Tenant] === undefined) return request;
  const identity = envelopeFromHeaders(headers)?.identity;
  return identity === undefined ? request : { ...request, identity };
}

/** Whether a delivery comes from a tenant's queue of the fair intake (it waited there after its submission). */
function queuedRun(delivery: IntakeDelivery): boolean {
  return delivery.headers?.[QUEUED_AT_HEADER] !== undefined;
}
