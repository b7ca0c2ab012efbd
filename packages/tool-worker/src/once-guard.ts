import { performance } from 'node:perf_hooks';
import {
  AgentMeshError,
  ErrorCode,
  isTransientFailure,
  isUnsentFailure,
  retry,
  sleep,
  type Backend,
  type Logger,
  type ToolInvocation,
  type ToolOutcome,
} from '@agentmesh/protocol';
import type { RunCallScope } from './attempt.js';
import type { AbortScope, CallProgress } from './call-scope.js';
import type { Tool } from './define-tool.js';
import type { Executor } from './executor.js';
import {
  OutcomeCache,
  SharedOutcomes,
  type CacheEntry,
  type OutcomeCacheOptions,
  type SharedEntry,
  type SharedOutcomeOptions,
} from './outcome-cache.js';

const CLAIM_POLL_MS = 200;
/** Refusals of a call that ran nothing (its shared outcome store could not be read): never kept for replay. */
const notRun = new WeakSet<ToolOutcome>();

export interface OnceGuardOptions {
  workerId: string;
  logger: Logger;
  executor: Executor;
  /**
   * Aborted when the worker drains: a call waiting on another replica's claim then gives up. A scope, not a signal:
   * many calls waiting at once would pile their listeners up on one AbortSignal.
   */
  draining: AbortScope;
  outcomeCache?: OutcomeCacheOptions;
}

/**
 * Runs a non-idempotent call at most once per idempotency key: per process (a duplicate waits for the first call and
 * replays its outcome) and, with the shared outcome store, across every replica (claim the key, run, store the
 * outcome). The key includes tenant and tool, so a call sent again under a new key (a planner-level retry) always
 * runs again and never gets the first attempt's recorded error. Every wait ends at once when the call's run is
 * cancelled.
 */
export class OnceGuard {
  private readonly cache: OutcomeCache;
  private shared: SharedOutcomes | undefined;

  constructor(private readonly options: OnceGuardOptions) {
    this.cache = new OutcomeCache(options.outcomeCache);
  }

  /** Opens the shared outcome store (the one place the worker opens a KV bucket), unless turned off. */
  async open(bus: Backend, prefix: string, shared: SharedOutcomeOptions | false | undefined): Promise<void> {
    if (shared !== false) this.shared = await SharedOutcomes.open(bus, prefix, shared ?? {});
  }

  /** Runs `invocation` of a non-idempotent tool that carries an idempotency key. */
  run(
    tool: Tool<any, any>,
    invocation: ToolInvocation,
    call: RunCallScope,
  ): ToolOutcome | Promise<ToolOutcome> {
    const tenant = invocation.identity.tenant;
    const idempotencyKey = invocation.idempotency_key!;
    const key =
      tenant === 'default'
        ? `${tool.name}\u0000${idempotencyKey}`
        : `${tool.name}\u0001${tenant.length}:${tenant}\u0000${idempotencyKey}`;
    const known = this.cache.find(key);
    if (known === undefined) return this.runFirst(tool, invocation, call, this.cache.begin(key));
    if (known.outcome !== undefined) return replay(invocation, known.outcome);
    return this.replayWhenDone(tool, invocation, call, known);
  }

  private async runFirst(
    tool: Tool<any, any>,
    invocation: ToolInvocation,
    call: RunCallScope,
    entry: CacheEntry,
  ): Promise<ToolOutcome> {
    let outcome: ToolOutcome | undefined;
    let kept: ToolOutcome | undefined;
    try {
      if (this.shared === undefined) outcome = kept = await this.options.executor.run(tool, invocation, call);
      else {
        const once = await this.runOnce(tool, invocation, call, this.shared);
        outcome = { ...once, dedup: 'shared' };
        // a refusal that ran nothing is not replayed: the same call sent again asks the store again
        if (!notRun.has(once)) kept = outcome;
      }
      return outcome;
    } finally {
      this.cache.finish(entry, kept);
    }
  }

  private async replayWhenDone(
    tool: Tool<any, any>,
    invocation: ToolInvocation,
    call: RunCallScope,
    entry: CacheEntry,
  ): Promise<ToolOutcome> {
    const t0 = performance.now();
    const progress = this.options.executor.openProgress(invocation);
    try {
      const outcome = await call.race(this.cache.wait(entry));
      return outcome === undefined ? await this.run(tool, invocation, call) : replay(invocation, outcome);
    } catch (error) {
      return this.options.executor.errorOutcome(invocation, error, 1, performance.now() - t0);
    } finally {
      progress?.close();
    }
  }

  /**
   * Across replicas: replays a stored outcome, waits for a call another worker is running, refuses (`worker_lost`,
   * not retryable) a call whose worker stopped without an outcome, and otherwise claims the key, runs the call and
   * stores its outcome.
   */
  private async runOnce(
    tool: Tool<any, any>,
    invocation: ToolInvocation,
    call: RunCallScope,
    shared: SharedOutcomes,
  ): Promise<ToolOutcome> {
    const key = SharedOutcomes.keyOf(invocation.identity.tenant, tool.name, invocation.idempotency_key!);
    const t0 = performance.now();
    const fail = (error: unknown) =>
      this.options.executor.errorOutcome(invocation, error, 1, performance.now() - t0);
    const waitUntil = Date.now() + (invocation.timeout_ms ?? tool.policy.timeout_ms) + shared.claimStaleMs;
    let progress: CallProgress | undefined;
    try {
      for (;;) {
        let entry: SharedEntry | undefined;
        try {
          entry = await call.race(rideOutStore(() => shared.get(key), call, isTransientFailure));
          if (entry === undefined) {
            const claimed = await this.claimAndRun(tool, invocation, call, { shared, key });
            if (claimed !== undefined) return claimed;
            continue;
          }
        } catch (error) {
          if (call.aborted) return fail(call.reason);
          const refusal = fail(this.storeUnavailable(tool, invocation, error));
          notRun.add(refusal);
          return refusal;
        }
        if (entry.state === 'done') return replay(invocation, entry.outcome);
        if (entry.state === 'claimed' && shared.isLive(entry) && Date.now() < waitUntil) {
          progress ??= this.options.executor.openProgress(invocation, true);
          const closed = await this.waitForClaim(invocation, call, entry);
          if (closed !== undefined) return fail(closed);
          continue;
        }
        return fail(this.mayHaveRun(tool, invocation, entry, shared));
      }
    } finally {
      progress?.close();
    }
  }

  /** Waits one poll interval for another replica's claim; the error that ends the wait early (cancel, drain). */
  private async waitForClaim(
    invocation: ToolInvocation,
    call: RunCallScope,
    entry: Extract<SharedEntry, { state: 'claimed' }>,
  ): Promise<unknown> {
    const draining = this.options.draining;
    try {
      await call.race(draining.race(sleep(CLAIM_POLL_MS)));
      return undefined;
    } catch (error) {
      if (call.aborted) return error;
    }
    return new AgentMeshError(
      ErrorCode.Closed,
      `worker ${this.options.workerId} is draining while call ${invocation.call_id} runs on worker ${entry.worker_id}`,
      { retryable: false },
    );
  }

  /** Claims the key and runs the call under it; undefined when another replica claimed it first. */
  private async claimAndRun(
    tool: Tool<any, any>,
    invocation: ToolInvocation,
    call: RunCallScope,
    where: { shared: SharedOutcomes; key: string },
  ): Promise<ToolOutcome | undefined> {
    const { shared } = where;
    // a create that never reached JetStream is sent again; one that may have landed (a timeout) is not
    const claim = await rideOutStore(
      () => shared.claim(where.key, this.options.workerId),
      call,
      isUnsentFailure,
    );
    if (claim === undefined) return undefined;
    const refresher = setInterval(
      () => void claim.refresh().catch(() => undefined),
      Math.max(50, Math.floor(shared.claimStaleMs / 3)),
    );
    let outcome: ToolOutcome | undefined;
    try {
      outcome = await this.options.executor.run(tool, invocation, call, true);
      return outcome;
    } finally {
      clearInterval(refresher);
      const final: SharedEntry =
        outcome === undefined || outcome.error?.code === ErrorCode.Cancelled
          ? {
              state: 'interrupted',
              worker_id: this.options.workerId,
              at: Date.now(),
              reason: outcome?.error?.message ?? 'the call ended without an outcome',
            }
          : { state: 'done', outcome, at: Date.now() };
      await claim
        .settle(final)
        .catch((error: unknown) =>
          this.options.logger.warn(
            { run_id: invocation.run_id, call_id: invocation.call_id, err: (error as Error).message },
            'outcome not stored: a re-sent call will be refused as "may have run"',
          ),
        );
    }
  }

  private storeUnavailable(tool: Tool<any, any>, invocation: ToolInvocation, error: unknown): AgentMeshError {
    return new AgentMeshError(
      ErrorCode.Unavailable,
      `the shared outcome store is unavailable, so worker ${this.options.workerId} did not run call ` +
        `${invocation.call_id} of the non-idempotent tool "${tool.name}": ${(error as Error).message}`,
      { retryable: true },
    );
  }

  private mayHaveRun(
    tool: Tool<any, any>,
    invocation: ToolInvocation,
    entry: SharedEntry,
    shared: SharedOutcomes,
  ): AgentMeshError {
    const firstWorker = entry.state === 'done' ? undefined : entry.worker_id;
    const what =
      entry.state === 'interrupted'
        ? `was interrupted (${entry.reason})`
        : shared.isLive(entry)
          ? 'is still running it'
          : 'stopped without an outcome';
    this.options.logger.warn(
      { run_id: invocation.run_id, call_id: invocation.call_id, tool: tool.name, first_worker: firstWorker },
      'non-idempotent call re-sent after its worker was lost: not run again',
    );
    return new AgentMeshError(
      ErrorCode.WorkerLost,
      `call ${invocation.call_id} of tool "${tool.name}" was already started by worker ${firstWorker}, which ` +
        `${what}; the tool is not idempotent and may have run, so it was not run again`,
      {
        retryable: false,
        details: { first_worker_id: firstWorker, idempotency_key: invocation.idempotency_key },
      },
    );
  }
}

function replay(invocation: ToolInvocation, outcome: ToolOutcome): ToolOutcome {
  return { ...outcome, call_id: invocation.call_id, replayed: true };
}

/** How long a call rides out a shared outcome store that does not answer for a moment (a leader election). */
const STORE_RIDE_OUT_MS = 10_000;

/** Runs a read or claim of the shared outcome store again through failures `transient` says will pass. */
function rideOutStore<T>(
  operation: () => Promise<T>,
  call: AbortScope,
  transient: (error: unknown) => boolean,
): Promise<T> {
  return retry(operation, {
    timeoutMs: STORE_RIDE_OUT_MS,
    baseMs: 100,
    capMs: 1_000,
    signal: call.signal,
    retryable: transient,
  });
}
