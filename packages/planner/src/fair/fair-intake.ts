import {
  AgentMeshError,
  ErrorCode,
  ServiceName,
  actorMetrics,
  backoffDelay,
  encodeJson,
  sleep,
  type KvStore,
  type Logger,
  type RunRequest,
  type Subjects,
  type TenantsConfig,
  type WorkConsumer,
  type WorkItem,
  type WorkQueue,
} from '@agentmesh/protocol';
import { queueDelivery, type IntakeDelivery } from '../infra/intake-queue.js';
import { Semaphore } from '../util.js';
import { PRIORITIES, emptyTenantQueue, queuedRuns, type TenantQueue } from './queue-view.js';
import { QueuedSet } from './queued-set.js';
import { TenantQueues, type Placement } from './tenant-queues.js';
import { StrideScheduler, type StrideCandidate } from './stride.js';

/** Header of a waiting run: when it entered the fair intake (ms since the epoch). */
export const QUEUED_AT_HEADER = 'am-queued-at';
/** Header of a waiting run: the seq of its last event stored while it waited (`run.queued`). */
export const QUEUED_SEQ_HEADER = 'am-queued-seq';

const PULL_EXPIRES_MS = 2_000;
/** Submissions one planner moves to tenant queues at once. */
const DISPATCH_LANES = 64;
/** A fetch from a consumer the view says has runs: short, since another planner may have taken them. */
const TAKE_EXPIRES_MS = 1_000;
/** A child run that found no free slot is offered again after this long. */
const CHILD_RETRY_MS = 250;
/** How often the scheduler looks at the queues when nothing woke it. */
const TICK_MS = 200;

export type FairAdmission = { ok: true; request: RunRequest; runId: string } | { ok: false };

export interface FairIntakeDeps {
  queue: WorkQueue;
  subjects: Subjects;
  tenants: TenantsConfig;
  slots: Semaphore;
  leaseMs: number;
  logger: Logger;
  admission(delivery: IntakeDelivery): FairAdmission;
  /** Runs (or refuses, when invalid) a delivered request; resolves when the run ended. */
  deliver(delivery: IntakeDelivery): Promise<void>;
  refuse(delivery: IntakeDelivery, runId: string, error: AgentMeshError): Promise<void>;
  /**
   * Counts a submission against its tenant's `runs_per_minute` and checks its budget before it waits in a queue:
   * undefined when it may wait, else how the submission was settled (refused with `run.failed`, or sent back).
   */
  admitSubmission(
    delivery: IntakeDelivery,
    request: RunRequest,
    runId: string,
  ): Promise<{ kind: 'ack' } | { kind: 'nak'; delayMs: number } | undefined>;
  /** The bucket of bounded tenants' waiting runs (`max_queued_runs`). */
  waitingRuns: () => Promise<KvStore>;
  /** True when the run's record says it ended (e.g. it was cancelled while it waited). */
  finished(runId: string): Promise<boolean>;
  /**
   * Stores `run.accepted` and `run.queued` for a run that waits (once: a redelivery finds them stored) and returns
   * the seq of the last event stored for the run.
   */
  storeQueued(runId: string, request: RunRequest, queued: QueuedPlace): Promise<number>;
}

/** Where a run waits: `submitSeq` is its submission's sequence in the runs stream (its message follows it). */
export interface QueuedPlace {
  tenant: string;
  priority: number;
  position: number;
  redelivered: boolean;
  submitSeq: number;
}

/**
 * The fair intake (tenants configured, durable backend). A dispatcher takes each request from `runs.submit`: a run
 * of a tenant without `max_concurrent_runs` starts at once when this planner has a free slot and nothing waits;
 * any other run moves to its tenant's queue in the same work-queue stream (`queued.<tenant>.<priority>`, deduped
 * by run id) before the submission is acked. A capped tenant's runs start only through its admitted consumer,
 * whose `max_ack_pending` is the cap: a run keeps its message unacked until it ends, so the NATS server holds the
 * tenant to its cap across every planner, through restarts and takeovers. A scheduler per planner promotes waiting
 * runs (best priority first) while the cap has room and gives free slots to tenants by weight (stride scheduling).
 */
export class FairIntake {
  private readonly stopping = new AbortController();
  private readonly stride = new StrideScheduler();
  private wake: (() => void) | undefined;
  private running: Promise<unknown> | undefined;
  private readonly bounded: QueuedSet;
  /** When unacked messages were first seen (or last pulled for) per consumer. */
  private readonly probes = new Map<string, number>();

  private readonly tq: TenantQueues;

  constructor(private readonly deps: FairIntakeDeps) {
    this.bounded = new QueuedSet(deps.waitingRuns);
    this.tq = new TenantQueues(deps);
  }

  start(): void {
    this.running = Promise.all([this.dispatchLoop(), this.scheduleLoop()]);
  }

  async stop(): Promise<void> {
    this.stopping.abort();
    this.wake?.();
    await this.running?.catch(() => undefined);
  }

  private async dispatchLoop(): Promise<void> {
    const main = await this.deps.queue.consumer(ServiceName.Planner, { ackWaitMs: this.deps.leaseMs });
    const { signal } = this.stopping;
    const lanes = new Semaphore(DISPATCH_LANES);
    for (let failures = 0; !signal.aborted;) {
      const release = await lanes.acquire();
      try {
        const item = await main.next({ expiresMs: PULL_EXPIRES_MS, signal });
        failures = 0;
        if (item === undefined) release();
        else void this.dispatchOne(item).finally(release);
      } catch (error) {
        release();
        if (signal.aborted) break;
        this.deps.logger.warn({ err: (error as Error).message }, 'fair intake dispatch failed; retrying');
        await sleep(backoffDelay(++failures, { baseMs: 500, capMs: 5_000 }), signal);
      }
    }
  }

  private async dispatchOne(item: WorkItem): Promise<void> {
    try {
      await this.dispatch(item);
    } catch (error) {
      this.deps.logger.warn(
        { err: (error as Error).message },
        'run request not dispatched; redelivered later',
      );
      item.nak(1_000);
    }
  }

  /** One submission: started here at once, refused (`queue_full`), or moved to its tenant's queue. */
  private async dispatch(item: WorkItem): Promise<void> {
    const delivery = queueDelivery(item);
    const admission = this.deps.admission(delivery);
    if (!admission.ok) return void this.deps.deliver(delivery);
    const { request, runId } = admission;
    // a submission delivered again after its run was queued and cancelled (or ended) is not queued again
    if (item.deliveries > 1 && (await this.deps.finished(runId))) return item.ack();
    if (request.parent !== undefined) return this.startChild(delivery, item);
    const place = this.tq.placement(request);
    const maxQueued = this.tq.maxQueued(place.tenant);
    let queues = await this.tq.queues();
    // a capped tenant's run goes straight to its admitted runs only on the queue's counts of now, never past waiting peers
    if (place.cap > 0 && queuedRuns(queues.get(place.tenant) ?? emptyTenantQueue()) === 0)
      queues = await this.tq.queues(0);
    if (place.cap === 0 && startable(queues, (t) => this.tq.cap(t)) < this.deps.slots.free) {
      const release = this.deps.slots.tryAcquire();
      if (release !== undefined) return void this.deps.deliver(delivery).finally(release);
    }
    const settled =
      item.deliveries > 1 ? undefined : await this.deps.admitSubmission(delivery, request, runId);
    if (settled !== undefined) return delivery.settle(settled);
    const q = queues.get(place.tenant) ?? emptyTenantQueue();
    const direct = place.cap > 0 && queuedRuns(q) === 0 && q.admittedRunning < place.cap;
    if (!direct && maxQueued > 0 && !(await this.bounded.add(place.tenant, runId, maxQueued)))
      return this.deps.refuse(delivery, runId, queueFull(place.tenant, maxQueued));
    const position = positionOf(q, place);
    if (!queues.has(place.tenant)) queues.set(place.tenant, q);
    if (direct) q.admitted++;
    else q.waiting[place.priority - 1]!++;
    await this.enqueue(item, { ...request, id: runId }, place, direct ? 'admitted' : position);
    this.wake?.();
  }

  /**
   * A child run is part of its parent's started run: it never waits behind its tenant's cap (the parent holding a
   * slot while its child waits for one would never end). It starts on a free slot, else is offered again shortly.
   */
  private startChild(delivery: IntakeDelivery, item: WorkItem): void {
    const release = this.deps.slots.tryAcquire();
    if (release === undefined) item.nak(CHILD_RETRY_MS);
    else void this.deps.deliver(delivery).finally(release);
  }

  /** Moves a run to its tenant's queue: events first, then the queue message, then the ack of the submission. */
  private async enqueue(
    item: WorkItem,
    request: RunRequest & { id: string },
    place: Placement,
    to: 'admitted' | number,
  ): Promise<void> {
    const headers: Record<string, string> = { ...item.headers, [QUEUED_AT_HEADER]: String(Date.now()) };
    if (to === 'admitted') await this.tq.admitted(place.tenant);
    else {
      const seq = await this.deps.storeQueued(request.id, request, {
        tenant: place.tenant,
        priority: place.priority,
        position: to,
        redelivered: item.deliveries > 1,
        submitSeq: item.seq,
      });
      headers[QUEUED_SEQ_HEADER] = String(seq);
      await this.tq.waiting(place.tenant, place.priority);
    }
    const subject =
      to === 'admitted'
        ? this.deps.subjects.queuedRuns(place.tenant, 'admitted')
        : this.deps.subjects.queuedRuns(place.tenant, place.priority);
    await this.deps.queue.submit(encodeJson(request), { dedupeId: `q-${request.id}`, headers, subject });
    await item.ack();
  }

  private async scheduleLoop(): Promise<void> {
    const { signal } = this.stopping;
    for (let failures = 0; !signal.aborted;) {
      try {
        await this.promote();
        await this.startWaiting();
        await this.probeUnacked();
        failures = 0;
        await this.idle();
      } catch (error) {
        if (signal.aborted) break;
        this.deps.logger.warn({ err: (error as Error).message }, 'fair intake scheduling failed; retrying');
        await sleep(backoffDelay(++failures, { baseMs: 500, capMs: 5_000 }), signal);
      }
    }
  }

  private idle(): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, TICK_MS);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
    });
  }

  /** Capped tenants: waiting runs move to the admitted consumer, best priority first, while the cap has room. */
  private async promote(): Promise<void> {
    const queues = await this.tq.queues();
    for (const [tenant, q] of queues) {
      const cap = this.tq.cap(tenant);
      if (cap === 0) continue;
      let room = cap - q.admittedRunning - q.admitted;
      for (const priority of PRIORITIES) {
        while (room > 0 && q.waiting[priority - 1]! > 0 && !this.stopping.signal.aborted) {
          const item = await (await this.tq.waiting(tenant, priority)).next({ expiresMs: TAKE_EXPIRES_MS });
          q.waiting[priority - 1]!--;
          if (item === undefined) break;
          await this.admit(item, tenant);
          q.admitted++;
          room--;
        }
      }
    }
  }

  private async admit(item: WorkItem, tenant: string): Promise<void> {
    const runId = runIdOf(item);
    await this.tq.admitted(tenant);
    await this.deps.queue.submit(item.data, {
      dedupeId: `a-${runId}`,
      ...(item.headers === undefined ? {} : { headers: item.headers }),
      subject: this.deps.subjects.queuedRuns(tenant, 'admitted'),
    });
    await item.ack();
  }

  /**
   * A message delivered and never acked (its planner stopped) is delivered again only to a pull, and the queue's
   * pending count leaves it out: so, once per ack wait, a consumer with unacked messages is pulled once.
   */
  private async probeUnacked(): Promise<void> {
    const queues = await this.tq.queues();
    for (const [tenant, q] of queues) {
      const capped = this.tq.cap(tenant) > 0;
      if (capped && q.admittedRunning > 0 && this.due(`a/${tenant}`))
        this.probe(tenant, this.tq.admitted(tenant), 'start');
      for (const p of PRIORITIES)
        if (q.waitingRunning[p - 1]! > 0 && this.due(`w/${tenant}/${p}`))
          this.probe(tenant, this.tq.waiting(tenant, p), capped ? 'promote' : 'start');
    }
  }

  /** True once unacked messages of `key` were seen an ack wait ago (and then once per ack wait). */
  private due(key: string): boolean {
    const now = Date.now();
    const since = this.probes.get(key);
    if (since === undefined) this.probes.set(key, now);
    if (since === undefined || now - since < this.deps.leaseMs) return false;
    this.probes.set(key, now);
    return true;
  }

  private probe(tenant: string, consumer: Promise<WorkConsumer>, then: 'start' | 'promote'): void {
    const release = then === 'start' ? this.deps.slots.tryAcquire() : () => undefined;
    if (release === undefined) return;
    void (async () => {
      const item = await (await consumer).next({ expiresMs: TAKE_EXPIRES_MS });
      if (item === undefined) release();
      else if (then === 'start') this.begin(item, tenant, release);
      else await this.admit(item, tenant).finally(release);
    })().catch((error: unknown) => {
      release();
      this.deps.logger.warn({ err: (error as Error).message }, 'fair intake probe failed');
    });
  }

  /** Free slots of this planner go to tenants with startable runs, by weight; within a tenant by priority. */
  private async startWaiting(): Promise<void> {
    for (;;) {
      const queues = await this.tq.queues();
      const candidates: StrideCandidate[] = [];
      for (const [tenant, q] of queues)
        if (canStart(q, this.tq.cap(tenant))) candidates.push({ tenant, weight: this.tq.weight(tenant) });
      if (candidates.length === 0 || this.stopping.signal.aborted) return;
      const release = this.deps.slots.tryAcquire();
      if (release === undefined) return;
      const tenant = this.stride.pick(candidates)!;
      const item = await this.take(tenant, queues.get(tenant)!);
      if (item === undefined) {
        release();
        continue;
      }
      this.stride.charge(tenant, this.tq.weight(tenant), candidates);
      this.begin(item, tenant, release);
    }
  }

  private async take(tenant: string, q: TenantQueue): Promise<WorkItem | undefined> {
    if (this.tq.cap(tenant) > 0) {
      q.admitted--;
      q.admittedRunning++;
      return (await this.tq.admitted(tenant)).next({ expiresMs: TAKE_EXPIRES_MS });
    }
    const priority = PRIORITIES.find((p) => q.waiting[p - 1]! > 0)!;
    q.waiting[priority - 1]!--;
    q.waitingRunning[priority - 1]!++;
    return (await this.tq.waiting(tenant, priority)).next({ expiresMs: TAKE_EXPIRES_MS });
  }

  private begin(item: WorkItem, tenant: string, release: () => void): void {
    const queuedAt = Number(item.headers?.[QUEUED_AT_HEADER]);
    if (Number.isFinite(queuedAt))
      actorMetrics().tenantQueueWait(tenant, Math.max(0, Date.now() - queuedAt) / 1000);
    const seq = Number(item.headers?.[QUEUED_SEQ_HEADER]);
    const waited = Number.isInteger(seq) && seq > 0;
    const delivery = queueDelivery(item, waited ? seq : undefined);
    void (async () => {
      try {
        if (waited && this.tq.maxQueued(tenant) > 0) await this.bounded.remove(tenant, runIdOf(item));
        await this.deps.deliver(delivery);
      } catch (error) {
        this.deps.logger.warn({ err: (error as Error).message }, 'queued run not started; redelivered later');
        item.nak(1_000);
      } finally {
        release();
        this.wake?.();
      }
    })();
  }
}

/** The run id of a queued run (the dispatcher writes it into every request it queues). */
function runIdOf(item: WorkItem): string {
  return (JSON.parse(item.text()) as { id: string }).id;
}

/** A run of this tenant can start now: an admitted run under the cap, or (uncapped) a waiting run. */
function canStart(q: TenantQueue, cap: number): boolean {
  return cap > 0 ? q.admitted > 0 && q.admittedRunning < cap : q.waiting.some((n) => n > 0);
}

/** How many waiting runs could start now (a new run starts at once only while free slots outnumber them). */
function startable(queues: Map<string, TenantQueue>, cap: (tenant: string) => number): number {
  let n = 0;
  for (const [tenant, q] of queues) {
    const c = cap(tenant);
    n +=
      c > 0 ? Math.max(0, Math.min(q.admitted, c - q.admittedRunning)) : q.waiting.reduce((a, b) => a + b, 0);
  }
  return n;
}

/** A new run's place among its tenant's waiting runs: those of its priority or better, plus itself. */
function positionOf(q: TenantQueue, place: Placement): number {
  let ahead = q.admitted;
  for (let p = 1; p <= place.priority; p++) ahead += q.waiting[p - 1]!;
  return ahead + 1;
}

function queueFull(tenant: string, maxQueued: number): AgentMeshError {
  return new AgentMeshError(
    ErrorCode.QueueFull,
    `tenant "${tenant}" has ${maxQueued} runs waiting, its max_queued_runs: submit again once some have started`,
    { retryable: true, details: { tenant, max_queued_runs: maxQueued } },
  );
}
