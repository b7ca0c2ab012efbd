import type { Bus, BusMessage, Subscription } from './bus/types.js';
import { parseJson } from './codec.js';
import type { AgentMeshError } from './errors.js';
import type { ToolInvocationInput, ToolOutcome, ToolProgress } from './schemas.js';
import { SlotTable } from './slot-table.js';
import { REPLY_SECRET_LENGTH, replySecret } from './reply-secret.js';

export type SendResult =
  | { kind: 'outcome'; outcome: ToolOutcome; sawStarted: boolean }
  | { kind: 'lost'; workerId: string | undefined; why: string; dedup: boolean }
  | { kind: 'error'; error: AgentMeshError };

/** One send of a call: what goes on the wire and how long to wait for it. */
export interface Send {
  /** The tool's subject, served by its queue group. */
  subject: string;
  /** One worker's own subject to send to instead (it said it has room), or undefined. */
  target: string | undefined;
  invocation: ToolInvocationInput;
  /** The invocation was checked against `ToolInvocationSchema` in this same turn (the first send of a call). */
  checked: boolean;
  attempt: number;
  idempotencyKey: string;
  idempotent: boolean;
  remainingMs: number;
  lostAfterMs: number;
  /** Date.now() when the send starts. */
  now: number;
  signal: AbortSignal | undefined;
  onProgress: ((progress: ToolProgress) => void) | undefined;
}

export interface CallWatch {
  /** Where the worker sends this call's progress notices. */
  subject: string;
  handle: number;
  readonly callId: string;
  /** The subject the call was sent on, and whether its tool is not idempotent. */
  readonly toolSubject: string;
  readonly tool: string;
  readonly nonIdempotent: boolean;
  /** Set when the worker's `started` says the call runs under a claim in the shared outcome store. */
  dedup: boolean;
  readonly lostAfterMs: number;
  lastHeard: number;
  /** Set by the worker's `started` notice. */
  workerId: string | undefined;
  readonly onProgress: ((progress: ToolProgress) => void) | undefined;
  readonly resolve: (result: SendResult) => void;
}

const PROGRESS_KINDS: ReadonlySet<unknown> = new Set(['started', 'progress', 'heartbeat']);

/**
 * One wildcard subscription per bus carries the progress notices of every call made through it, and one timer finds
 * the calls whose worker went silent. The timer is set for the first moment a watched call could be silent too long
 * (not a fixed tick: a caller whose calls run for seconds is not woken ten times a second to find them all heard
 * from); it stops when it finds no call.
 */
export class ProgressRouter {
  private readonly prefix: string;
  private readonly entries = new SlotTable<CallWatch>();
  private readonly dedupBySubject = new Map<string, boolean>();
  private sub: Subscription | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** When {@link timer} fires (Date.now() time), or Infinity without one. */
  private timerAt = Infinity;

  constructor(readonly bus: Bus) {
    this.prefix = bus.createInbox();
  }

  watch(send: Send, resolve: (result: SendResult) => void): CallWatch {
    this.sub ??= this.bus.subscribe(`${this.prefix}.*`, (msg) => this.onMessage(msg));
    const watch: CallWatch = {
      subject: '',
      handle: Number.NaN,
      callId: send.invocation.call_id,
      toolSubject: send.subject,
      tool: send.invocation.tool,
      nonIdempotent: !send.idempotent,
      dedup: false,
      lostAfterMs: send.lostAfterMs,
      lastHeard: send.now,
      workerId: undefined,
      onProgress: send.onProgress,
      resolve,
    };
    const handle = this.entries.add(watch);
    watch.handle = handle;
    watch.subject = `${this.prefix}.${replySecret()}${SlotTable.token(handle)}`;
    const due = send.now + send.lostAfterMs;
    if (due < this.timerAt) this.checkAt(due, send.now);
    return watch;
  }

  unwatch(watch: CallWatch): void {
    this.entries.delete(watch.handle);
  }

  /** Ends the watch and settles its call; only the first settlement reaches the call. */
  settle(watch: CallWatch, result: SendResult): void {
    const watched = this.entries.delete(watch.handle);
    if (result.kind === 'outcome' && watch.nonIdempotent)
      this.learn(watch.toolSubject, result.outcome.dedup === 'shared');
    if (watched) watch.resolve(result);
  }

  /**
   * Whether the workers of a non-idempotent tool were last seen deduplicating through a shared outcome store. One
   * notice or outcome without it (an older or differently configured replica) turns it off for good on this bus.
   */
  sharedDedup(toolSubject: string): boolean {
    return this.dedupBySubject.get(toolSubject) === true;
  }

  private learn(toolSubject: string, shared: boolean): void {
    const known = this.dedupBySubject.get(toolSubject);
    if (known === shared || known === false) return;
    if (this.dedupBySubject.size >= 4096) this.dedupBySubject.clear();
    this.dedupBySubject.set(toolSubject, shared);
  }

  private onMessage(msg: BusMessage): void {
    const entry = this.entries.get(
      SlotTable.fromToken(msg.subject.slice(this.prefix.length + 1 + REPLY_SECRET_LENGTH)),
    );
    if (entry === undefined || entry.subject !== msg.subject) return;
    const p = safeJson(msg.data) as Partial<ToolProgress> | undefined;
    if (
      p === undefined ||
      p === null ||
      !PROGRESS_KINDS.has(p.kind) ||
      p.call_id !== entry.callId ||
      typeof p.worker_id !== 'string' ||
      typeof p.tool !== 'string'
    )
      return;
    entry.lastHeard = Date.now();
    if (p.kind === 'started') {
      entry.workerId = p.worker_id;
      entry.dedup = p.dedup === 'shared';
      if (entry.nonIdempotent) this.learn(entry.toolSubject, entry.dedup);
    }
    entry.onProgress?.(p as ToolProgress);
  }

  /** Sets the timer to find silent calls at `due`, in place of a later one. */
  private checkAt(due: number, now: number): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timerAt = due;
    this.timer = setTimeout(() => this.check(), Math.max(0, due - now) + 1);
    this.timer.unref();
  }

  /** Settles the calls silent too long as lost, and sets the timer for the next one that could be. */
  private check(): void {
    this.timer = undefined;
    this.timerAt = Infinity;
    const now = Date.now();
    let next = Infinity;
    this.entries.forEach((entry) => {
      const silent = now - entry.lastHeard;
      if (silent <= entry.lostAfterMs) {
        next = Math.min(next, entry.lastHeard + entry.lostAfterMs);
        return;
      }
      this.settle(entry, {
        kind: 'lost',
        workerId: entry.workerId,
        dedup: entry.dedup,
        why:
          entry.workerId === undefined
            ? `no worker acknowledged it within ${entry.lostAfterMs} ms`
            : `no heartbeat for ${silent} ms`,
      });
    });
    if (next !== Infinity) this.checkAt(next, now);
  }
}

const routers = new WeakMap<Bus, ProgressRouter>();

export function progressRouter(bus: Bus): ProgressRouter {
  let router = routers.get(bus);
  if (router === undefined) routers.set(bus, (router = new ProgressRouter(bus)));
  return router;
}

function safeJson(data: Uint8Array): unknown {
  try {
    return parseJson(data);
  } catch {
    return undefined;
  }
}
