import type { Bus, BusMessage, Subscription } from './bus/types.js';
import { outputCheck, parseJson } from './codec.js';
import { ToolCapacitySchema, type ToolCapacity } from './schemas.js';
import { WORKER_SUBJECT_TOKEN } from './subjects.js';

/** How long a capacity subscription outlives its last waiter, so that a busy stretch does not subscribe per call. */
const IDLE_UNSUBSCRIBE_MS = 5_000;

interface Waiter {
  wake(invoke: string | undefined): void;
}

interface Listener {
  readonly sub: Subscription;
  readonly waiters: Set<Waiter>;
  idle: NodeJS.Timeout | undefined;
}

const checkCapacity = outputCheck(ToolCapacitySchema);

/**
 * The calls of one bus that wait to be sent again after a worker turned them away `busy`. One subscription per tool
 * hears the workers that say they have room again (`ToolCapacity`); each notice wakes as many waiting calls as it
 * has room for, oldest first, and hands them the subject of the worker that has it.
 */
export class CapacityWaiters {
  private readonly listeners = new Map<string, Listener>();

  constructor(private readonly bus: Bus) {}

  /**
   * Waits at most `delayMs` for a notice on `capacitySubject` about the tool served on `toolSubject`. Resolves with
   * the subject of the worker that has room, or undefined when the delay ran out or `signal` aborted. A notice whose
   * subject is not one worker's own subject for that very tool is ignored.
   */
  wait(
    capacitySubject: string,
    toolSubject: string,
    delayMs: number,
    signal?: AbortSignal,
  ): Promise<string | undefined> {
    if (signal?.aborted) return Promise.resolve(undefined);
    const listener = this.listen(capacitySubject, toolSubject);
    return new Promise((resolve) => {
      const waiter: Waiter = {
        wake: (invoke) => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          listener.waiters.delete(waiter);
          if (listener.waiters.size === 0) this.idle(capacitySubject, listener);
          resolve(invoke);
        },
      };
      const onAbort = () => waiter.wake(undefined);
      const timer = setTimeout(onAbort, delayMs);
      signal?.addEventListener('abort', onAbort, { once: true });
      if (listener.idle !== undefined) clearTimeout(listener.idle);
      listener.idle = undefined;
      listener.waiters.add(waiter);
    });
  }

  /** Calls waiting now, for tests and metrics. */
  get waiting(): number {
    let n = 0;
    for (const listener of this.listeners.values()) n += listener.waiters.size;
    return n;
  }

  private listen(subject: string, toolSubject: string): Listener {
    let listener = this.listeners.get(subject);
    if (listener === undefined) {
      const waiters = new Set<Waiter>();
      const sub = this.bus.subscribe(subject, (msg) => wakeFor(msg, toolSubject, waiters));
      listener = { sub, waiters, idle: undefined };
      this.listeners.set(subject, listener);
    }
    return listener;
  }

  private idle(subject: string, listener: Listener): void {
    listener.idle = setTimeout(() => {
      if (listener.waiters.size > 0 || this.listeners.get(subject) !== listener) return;
      this.listeners.delete(subject);
      listener.sub.unsubscribe();
    }, IDLE_UNSUBSCRIBE_MS);
    listener.idle.unref();
  }
}

function wakeFor(msg: BusMessage, toolSubject: string, waiters: Set<Waiter>): void {
  if (waiters.size === 0) return;
  const notice = readNotice(msg);
  if (
    notice === undefined ||
    !notice.invoke.startsWith(`${toolSubject}.`) ||
    !WORKER_SUBJECT_TOKEN.test(notice.invoke.slice(toolSubject.length + 1))
  )
    return;
  let room = notice.free;
  for (const waiter of waiters) {
    if (room-- <= 0) break;
    waiter.wake(notice.invoke);
  }
}

function readNotice(msg: BusMessage): ToolCapacity | undefined {
  try {
    const body: unknown = msg.value !== undefined ? msg.value : parseJson(msg.text(), 'capacity notice');
    return checkCapacity(body) ? (body as ToolCapacity) : undefined;
  } catch {
    return undefined;
  }
}

const waitersByBus = new WeakMap<Bus, CapacityWaiters>();

/** The capacity waiters of `bus`, made on first use. */
export function capacityWaiters(bus: Bus): CapacityWaiters {
  let waiters = waitersByBus.get(bus);
  if (waiters === undefined) waitersByBus.set(bus, (waiters = new CapacityWaiters(bus)));
  return waiters;
}
