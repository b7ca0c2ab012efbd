import { publishJson, type Bus, type Logger, type ToolProgress } from '@agentmesh/protocol';

/**
 * Cancellation for one call or attempt without an AbortController on the fast path: the AbortSignal is made only
 * when a handler asks for it, while timeouts and cancels still reject the running handler through {@link race}.
 */
export class AbortScope {
  private controller: AbortController | undefined;
  private abortReason: unknown;
  private done = false;
  /** The first listener has a field of its own: most scopes never get a second. */
  private listener: ((reason: unknown) => void) | undefined;
  private listeners: ((reason: unknown) => void)[] | undefined;

  get aborted(): boolean {
    return this.done;
  }

  get reason(): unknown {
    return this.abortReason;
  }

  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      if (this.done) this.controller.abort(this.abortReason);
    }
    return this.controller.signal;
  }

  abort(reason: unknown): void {
    if (this.done) return;
    this.done = true;
    this.abortReason = reason;
    this.controller?.abort(reason);
    const first = this.listener;
    const listeners = this.listeners;
    this.listener = undefined;
    this.listeners = undefined;
    first?.(reason);
    if (listeners !== undefined) for (const l of listeners) l(reason);
  }

  /** Calls `listener` once on abort; returns a function that removes it. */
  onAbort(listener: (reason: unknown) => void): () => void {
    this.addAbortListener(listener);
    return () => this.removeAbortListener(listener);
  }

  /** Calls `listener` once on abort (at once when already aborted). */
  addAbortListener(listener: (reason: unknown) => void): void {
    if (this.done) listener(this.abortReason);
    else if (this.listener === undefined) this.listener = listener;
    else (this.listeners ??= []).push(listener);
  }

  removeAbortListener(listener: (reason: unknown) => void): void {
    if (this.listener === listener) {
      this.listener = undefined;
      return;
    }
    const listeners = this.listeners;
    if (listeners === undefined) return;
    const at = listeners.lastIndexOf(listener);
    if (at === listeners.length - 1) listeners.pop();
    else if (at >= 0) listeners.splice(at, 1);
  }

  /**
   * Settles like `promise`, or rejects with the abort reason as soon as the scope is aborted. A promise left behind
   * by the abort may still fail: that failure is nobody's to handle.
   */
  race<T>(promise: Promise<T>): Promise<T> {
    if (this.done) {
      promise.catch(() => undefined);
      return Promise.reject(this.abortReason as Error);
    }
    return new Promise<T>((resolve, reject) => {
      const off = this.onAbort((reason) => reject(reason as Error));
      promise.then(
        (value) => {
          off();
          resolve(value);
        },
        (error: unknown) => {
          off();
          reject(error as Error);
        },
      );
    });
  }
}

/** Publishes one call's `started` and `progress` notices; its hub sends the heartbeats. */
export class CallProgress {
  /** `pending` until `started` goes out, then `active` until closed. */
  state: 'pending' | 'active' | 'closed' = 'pending';

  readonly subject: string;
  private readonly callId: string;
  private readonly tool: string;
  private readonly sharedDedup: boolean;

  constructor(
    private readonly hub: ProgressHub,
    call: { subject: string; callId: string; tool: string; sharedDedup: boolean },
  ) {
    this.subject = call.subject;
    this.callId = call.callId;
    this.tool = call.tool;
    this.sharedDedup = call.sharedDedup;
  }

  emit(message: string, data?: unknown): void {
    this.hub.startNow(this);
    this.send('progress', message, data);
  }

  send(kind: ToolProgress['kind'], message?: string, data?: unknown): void {
    this.hub.publish(this.subject, {
      kind,
      call_id: this.callId,
      tool: this.tool,
      worker_id: this.hub.workerId,
      ...(message === undefined ? {} : { message }),
      ...(data === undefined ? {} : { data }),
      ...(kind === 'started' && this.sharedDedup ? { dedup: 'shared' as const } : {}),
    });
  }

  close(): void {
    this.hub.close(this);
  }
}

/**
 * The progress notices of a worker. `started` goes out once the event loop turn in which a call began is over, so a
 * call answered within that turn costs no extra message (its outcome names the worker); one shared ticker sends the
 * heartbeats of every running call.
 */
export class ProgressHub {
  private pending: CallProgress[] = [];
  private readonly active = new Set<CallProgress>();
  private flush: NodeJS.Immediate | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly bus: Bus,
    readonly workerId: string,
    private readonly heartbeatMs: number,
    private readonly logger: Logger,
  ) {}

  /**
   * Starts tracking a call: `started` follows at the end of this turn, then heartbeats until it is closed.
   * `sharedDedup` marks `started` with `dedup: 'shared'` (the call runs under a claim in the shared outcome store).
   */
  open(subject: string, callId: string, tool: string, sharedDedup = false, later = false): CallProgress {
    const progress = new CallProgress(this, { subject, callId, tool, sharedDedup });
    this.pending.push(progress);
    if (!later) this.startAfterTurn();
    return progress;
  }

  /**
   * Sends `started` for the calls opened so far once this turn is over. A call opened `later` needs this only when it
   * goes on past its turn: one answered in it never schedules anything.
   */
  startAfterTurn(): void {
    this.flush ??= setImmediate(() => this.flushStarted());
  }

  /** Sends `started` for this call at once, if it has not gone out yet. */
  startNow(progress: CallProgress): void {
    if (progress.state === 'pending') this.activate(progress);
  }

  close(progress: CallProgress): void {
    const was = progress.state;
    progress.state = 'closed';
    if (was === 'pending') {
      // a call answered before its `started` went out (most are) need not wait in the list for the flush
      if (this.pending[this.pending.length - 1] === progress) this.pending.pop();
      else this.startAfterTurn(); // the flush clears it from the list
      return;
    }
    if (was !== 'active') return;
    this.active.delete(progress);
    if (this.active.size === 0 && this.timer !== undefined) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  publish(subject: string, progress: ToolProgress): void {
    try {
      publishJson(this.bus, subject, progress);
    } catch (error) {
      this.logger.debug({ err: (error as Error).message, subject }, 'progress notice not sent');
    }
  }

  private flushStarted(): void {
    this.flush = undefined;
    const pending = this.pending;
    this.pending = [];
    for (const progress of pending) if (progress.state === 'pending') this.activate(progress);
  }

  private activate(progress: CallProgress): void {
    progress.state = 'active';
    progress.send('started');
    this.active.add(progress);
    if (this.timer === undefined) {
      this.timer = setInterval(() => {
        for (const p of this.active) p.send('heartbeat');
      }, this.heartbeatMs);
      this.timer.unref();
    }
  }
}
