import {
  isTransientFailure,
  retry,
  type RunEvent,
  type RunRequest,
  type RunStatus,
} from '@agentmesh/protocol';
import { compactTranscript, summarizer } from '../compaction.js';
import type { DaemonState, DaemonWokenEvent } from '../model/snapshot.js';
import type { RunContext } from '../run/context.js';
import type { RunDaemon, RunInputSource } from '../run/ports.js';
import { warning } from '../run/events.js';
import type { IdleDaemons } from './idle-daemons.js';
import type { QueuedTrigger, TriggerQueue } from './trigger-queue.js';
import { WatchAnnouncer } from './watch-announcer.js';

/** A daemon's options with their defaults applied. */
export type DaemonOptions = Required<Omit<NonNullable<RunRequest['daemon']>, 'watch_paths'>> & {
  watch_paths: readonly string[];
};

/**
 * Where input messages come from while a daemon idles (the run's input subject, `agentmesh.runs.<id>.input`):
 * `hasInputMarker` says whether inputs wait, `watchInputs` calls back when one arrives. The run's input controls
 * (RunControlStore) are one; the woken turn applies the inputs itself (`run.input`), exactly once.
 */
export type DaemonInputSource = RunInputSource;

/** Transcripts above this estimate are compacted before a wake's turn, as a session's are (`sessions.max_tokens`). */
export const DAEMON_COMPACT_TOKENS = 100_000;

type Ending = { status: RunStatus; reason: string };
type Wake = { reason: 'trigger'; queued: QueuedTrigger } | { reason: 'input' } | { reason: 'timer' };

/** Wakes a waiting daemon; a ring before the wait is kept, so no trigger slips between a look and the wait. */
class Bell {
  private rung = false;
  private listener: (() => void) | undefined;
  readonly ring = (): void => {
    this.rung = true;
    this.listener?.();
  };

  reset(): void {
    this.rung = false;
  }

  /** Resolves true on a timer tick (`intervalMs` > 0), false on a ring or an abort. */
  wait(signal: AbortSignal, intervalMs: number): Promise<boolean> {
    return new Promise((resolve) => {
      const timer = intervalMs > 0 ? setTimeout(() => done(true), intervalMs) : undefined;
      const onAbort = () => done(false);
      const done = (ticked: boolean) => {
        if (timer) clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        this.listener = undefined;
        resolve(ticked);
      };
      if (this.rung || signal.aborted) return done(false);
      this.listener = () => done(false);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }
}

/**
 * A daemon run's life between turns: a turn without tool calls sends it idle (`daemon.idle`) instead of ending it;
 * it wakes on the next queued trigger (FIFO, one per wake), an input message or the timer (`daemon.woken`), and the
 * woken turn sees the trigger as a user message. It ends on cancel (`cancelled`) or, with `idle_watchdog` N, after
 * N timer ticks in a row with nothing else to wake it (`watchdog`).
 */
export class DaemonSession implements RunDaemon<RunContext> {
  private announcer: WatchAnnouncer | undefined;

  constructor(
    readonly options: DaemonOptions,
    readonly state: DaemonState,
    private readonly queue: TriggerQueue,
    private readonly hooks: { input?: DaemonInputSource; idle?: IdleDaemons; compactTokens?: number } = {},
  ) {}

  get idle(): boolean {
    return this.state.idle;
  }

  /**
   * A turn without tool calls: the daemon goes idle (the caller's loop then waits in {@link wake}). The idle state
   * is stored before `daemon.idle` is published, so a run resumed after the event never repeats the turn.
   */
  async goIdle(ctx: RunContext): Promise<undefined> {
    this.announceWatch(ctx);
    this.state.idle = true;
    ctx.state.nudges = 0;
    await ctx.checkpoint();
    const runId = ctx.state.run_id;
    await this.riding(ctx, 'marking the daemon idle', () => this.queue.setIdle(runId, true));
    const depth = await this.riding(ctx, 'reading the trigger queue', () => this.queue.depth(runId));
    ctx.sink.emit({ type: 'daemon.idle', queue_depth: depth });
    await ctx.checkpoint();
    return undefined;
  }

  /**
   * Runs a step of the daemon's wait again while it fails for a moment (a NATS node restarting, a request timing
   * out): a daemon idles for days and meets every such fault, which must not end it. Other failures end it as before.
   */
  private riding<T>(ctx: RunContext, what: string, step: () => Promise<T>): Promise<T> {
    return retry(step, {
      signal: ctx.signal,
      capMs: 5_000,
      retryable: (error) => isTransientFailure(error),
      onRetry: (error, attempt, delayMs) =>
        ctx.log.warn({ err: error.message, attempt, delay_ms: delayMs }, `daemon ${what}: retrying`),
    });
  }

  /** Waits for a wake source; returns an ending (cancel, watchdog) or undefined with the wake in the transcript. */
  async wake(ctx: RunContext): Promise<Ending | undefined> {
    const wake = await this.riding(ctx, 'waiting for a trigger, an input or its timer', () =>
      this.nextWake(ctx),
    );
    return 'status' in wake ? wake : this.woken(ctx, wake);
  }

  /** The next wake (or an ending): it only reads, so a failure may be retried from the start. */
  private async nextWake(ctx: RunContext): Promise<Ending | Wake> {
    const runId = ctx.state.run_id;
    this.announceWatch(ctx);
    const bell = new Bell();
    const input = this.hooks.input ?? ctx.env.hitl?.inputs;
    const watcher = await this.queue.watch(runId, bell.ring);
    const inputWatcher = await input?.watchInputs(runId, bell.ring).catch((error: unknown) => {
      watcher.stop();
      throw error;
    });
    this.hooks.idle?.set(runId, true);
    try {
      for (;;) {
        const stop = ctx.stopCheck();
        if (stop) return stop;
        bell.reset();
        await this.reportDropped(ctx);
        const queued = await this.queue.next(runId, this.state.handled);
        if (queued !== undefined) return { reason: 'trigger', queued };
        if (await input?.hasInputMarker(runId)) return { reason: 'input' };
        if (!(await bell.wait(ctx.signal, this.options.wake_interval_ms))) continue;
        this.state.idle_ticks++;
        const limit = this.options.idle_watchdog;
        if (limit > 0 && this.state.idle_ticks >= limit)
          return {
            status: 'watchdog',
            reason: `idle_watchdog: ${this.state.idle_ticks} timer ticks without a trigger or input`,
          };
        return { reason: 'timer' };
      }
    } finally {
      this.hooks.idle?.set(runId, false);
      watcher.stop();
      inputWatcher?.stop();
    }
  }

  /**
   * A run resumed from a wake's checkpoint publishes that wake's `daemon.woken` unless a stored event after the
   * checkpoint is it: the planner before may have stopped between the checkpoint and the event's append. When the
   * stored events could not be read but some follow the checkpoint, the event is taken as stored (it is published
   * right after the checkpoint), so a wake is never reported twice.
   */
  resumed(ctx: RunContext, stored: { lastSeq: number; earlier: readonly RunEvent[] }): void {
    const event = this.state.woken;
    if (event === undefined) return;
    this.state.woken = undefined;
    const checkpointed = ctx.state.seq;
    const unread = stored.lastSeq > checkpointed && !stored.earlier.some((e) => e.seq === stored.lastSeq);
    const published = stored.earlier.some((e) => e.seq > checkpointed && e.type === 'daemon.woken');
    if (unread || published) return;
    ctx.log.info(
      { reason: event.reason },
      'daemon.woken published on resume: the planner before stopped first',
    );
    ctx.sink.emit(event);
  }

  /** Removes the queue of an ended daemon. */
  async close(runId: string): Promise<void> {
    this.announcer?.stop();
    await this.queue.close(runId);
  }

  /** Starts announcing the daemon's `watch_paths` to the workspace workers (once per planner holding the run). */
  private announceWatch(ctx: RunContext): void {
    if (this.options.watch_paths.length === 0) return;
    this.announcer ??= new WatchAnnouncer(
      ctx.env.bus,
      ctx.env.prefix,
      { runId: ctx.state.run_id, paths: this.options.watch_paths },
      ctx.log,
    );
    this.announcer.start(ctx.signal);
  }

  private async woken(ctx: RunContext, wake: Wake): Promise<undefined> {
    let event: DaemonWokenEvent;
    if (wake.reason === 'trigger') {
      this.state.handled = wake.queued.seq;
      ctx.state.messages.push({ role: 'user', content: JSON.stringify(wake.queued.trigger) });
      event = { type: 'daemon.woken', reason: 'trigger', trigger: wake.queued.trigger };
    } else if (wake.reason === 'input') {
      event = { type: 'daemon.woken', reason: 'input' };
    } else {
      const tick = { kind: 'timer', at: new Date().toISOString() };
      ctx.state.messages.push({ role: 'user', content: JSON.stringify(tick) });
      event = { type: 'daemon.woken', reason: 'timer', trigger: tick };
    }
    if (wake.reason !== 'timer') this.state.idle_ticks = 0;
    this.state.idle = false;
    await this.compact(ctx);
    this.state.woken = event;
    await ctx.checkpoint();
    // published at once (the queue's updates below can take seconds while a NATS node restarts); should this planner
    // stop before it is stored, the checkpoint still holds it for the next one (see resumed)
    this.state.woken = undefined;
    ctx.sink.emit(event);
    const runId = ctx.state.run_id;
    if (wake.reason === 'trigger') {
      const seq = wake.queued.seq;
      await this.riding(ctx, 'removing the trigger taken', () => this.queue.remove(runId, seq));
    }
    await this.riding(ctx, 'marking the daemon busy', () => this.queue.setIdle(runId, false));
    return undefined;
  }

  private async compact(ctx: RunContext): Promise<void> {
    const result = await compactTranscript(ctx.state.messages, {
      maxTokens: this.hooks.compactTokens ?? DAEMON_COMPACT_TOKENS,
      summarize: summarizer(ctx.env.provider),
      signal: ctx.signal,
    });
    if (result === undefined) return;
    ctx.state.messages = result.messages;
    ctx.sink.emit({
      type: 'session.compacted',
      before_tokens: result.before_tokens,
      after_tokens: result.after_tokens,
    });
    ctx.log.info(
      { before_tokens: result.before_tokens, after_tokens: result.after_tokens, replaced: result.replaced },
      'daemon transcript compacted',
    );
  }

  private async reportDropped(ctx: RunContext): Promise<void> {
    const dropped = await this.queue.dropped(ctx.state.run_id);
    if (dropped <= this.state.dropped_reported) return;
    const refused = dropped - this.state.dropped_reported;
    this.state.dropped_reported = dropped;
    ctx.sink.emit(
      warning(
        'queue_full',
        `the trigger queue was full (capacity ${this.options.queue_capacity}): ${refused} trigger(s) refused`,
      ),
    );
  }
}

export type { DaemonState } from '../model/snapshot.js';
