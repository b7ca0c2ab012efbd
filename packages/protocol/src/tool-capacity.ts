import type { Bus, BusMessage, Subscription } from './bus/types.js';
import { outputCheck, parseJson } from './codec.js';
import { ToolCapacitySchema, type ToolCapacity } from './schemas.js';
import { WORKER_SUBJECT_TOKEN } from './subjects.js';

/** How long a capacity subscription outlives its last waiter, so that a busy stretch does not subscribe per call. */
const IDLE_UNSUBSCRIBE_MS = 5_000;
/** How long a worker that turned a call away full is remembered as a peer to name for the calls of its tool. */
const FULL_PEER_MS = 1_000;
/** Full workers remembered per tool, and tools with any remembered. */
const MAX_FULL_PEERS = 64;
const MAX_TOOLS_WITH_PEERS = 1_024;

interface Waiter {
  wake(invoke: string | undefined): void;
}

interface Listener {
  readonly sub: Subscription;
  readonly waiters: Set<Waiter>;
  idle: NodeJS.Timeout | undefined;
}

/** Compiled on its first notice, not deferred: a notice it fails is dropped, there is no zod fallback to decide. */
const checkCapacity = outputCheck(ToolCapacitySchema);

/**
 * The calls of one bus that wait to be sent again after a worker turned them away `busy`. One subscription per tool
 * hears the workers that say they have room again (`ToolCapacity`); each notice wakes as many waiting calls as it
 * has room for, oldest first, and hands them the subject of the worker that has it.
 */
export class CapacityWaiters {
  private readonly listeners = new Map<string, Listener>();
  /** By tool subject: the workers that turned a call away `busy` lately (by worker id), their own subject and when. */
  private readonly fullPeers = new Map<string, Map<string, { invoke: string; at: number }>>();

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

  /**
   * Remembers the worker that gave a `busy` answer (its `details`) to a call of the tool served on `toolSubject`, as
   * a full peer to name when the answer named the worker's own subject (it queues a call sent to it by name), or
   * forgets it when the answer did not. Returns the worker's id.
   */
  noteBusy(toolSubject: string, details: Record<string, unknown> | undefined): string | undefined {
    const workerId = details?.['worker_id'];
    if (typeof workerId !== 'string') return undefined;
    const invoke = details?.['invoke'];
    let peers = this.fullPeers.get(toolSubject);
    if (typeof invoke !== 'string' || !isWorkerSubject(invoke, toolSubject)) {
      peers?.delete(workerId);
      return workerId;
    }
    if (peers === undefined) {
      if (this.fullPeers.size >= MAX_TOOLS_WITH_PEERS) this.fullPeers.clear();
      this.fullPeers.set(toolSubject, (peers = new Map()));
    }
    peers.delete(workerId);
    if (peers.size >= MAX_FULL_PEERS) peers.clear();
    peers.set(workerId, { invoke, at: Date.now() });
    return workerId;
  }

  /**
   * The own subject of a worker of the tool served on `toolSubject`, other than `except` (the one that just turned
   * the call away), that turned a call away lately and said it queues a call sent to it by name: the call waits
   * there instead of going round the queue group again. The least recently named, so that calls turned away
   * together spread over the peers.
   */
  fullPeer(toolSubject: string, except: string | undefined): string | undefined {
    const peers = this.fullPeers.get(toolSubject);
    if (peers === undefined) return undefined;
    const now = Date.now();
    for (const [workerId, peer] of peers) {
      if (now - peer.at > FULL_PEER_MS) {
        peers.delete(workerId);
        continue;
      }
      if (workerId === except) continue;
      peers.delete(workerId);
      peers.set(workerId, peer);
      return peer.invoke;
    }
    return undefined;
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

/** Whether `subject` is one worker's own subject for the tool served on `toolSubject`. */
function isWorkerSubject(subject: string, toolSubject: string): boolean {
  return (
    subject.startsWith(`${toolSubject}.`) && WORKER_SUBJECT_TOKEN.test(subject.slice(toolSubject.length + 1))
  );
}

function wakeFor(msg: BusMessage, toolSubject: string, waiters: Set<Waiter>): void {
  if (waiters.size === 0) return;
  const notice = readNotice(msg);
  if (notice === undefined || !isWorkerSubject(notice.invoke, toolSubject)) return;
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
