import { ErrorCode, actorMetrics, type ErrorPayload } from '@agentmesh/protocol';
import type { CpuPool } from './cpu-pool.js';

export type WorkerState = 'new' | 'starting' | 'running' | 'draining' | 'stopped';

/** A tool this worker has room for again, and how many calls of it it would take now. */
export interface RoomFor {
  tool: string;
  free: number;
}

/** How a call reached the worker: `invoke` is its own subject for the tool, `byName` whether the call came on it. */
export interface CallRoute {
  invoke: string;
  byName: boolean;
}

/**
 * Which calls a worker takes: at most `concurrency` in flight, CPU-bound calls only while the thread pool's queue
 * has room, none unless it is running. A refused call is answered `busy` at once (retryable: it never started), so
 * the client sends it again and the tool's queue group gives it to another replica. While running, the worker also
 * owes the callers of every tool it turned away, or filled its thread pool with, a word once it has room again
 * ({@link leave}).
 */
export class Admission {
  state: WorkerState = 'new';
  private calls = 0;
  /** The CPU pool of the calls admitted so far, whose waiting calls are the admission queue depth gauge. */
  private cpuPool: CpuPool | undefined;
  /**
   * Tools whose callers may be waiting for this worker to have room: the CPU pool their calls need, and how many
   * calls it turned away that no notice has answered yet.
   */
  private readonly owed = new Map<string, { pool: CpuPool | undefined; waiting: number }>();

  constructor(
    private readonly workerId: string,
    readonly concurrency: number,
  ) {}

  /** Calls in flight now. */
  get inFlight(): number {
    return this.calls;
  }

  /**
   * Takes a call (counted until {@link leave}), or returns the `busy` answer that refuses it. A CPU-bound call sent
   * to this worker by name (its `route` came by its own subject for the tool) may wait in the pool's named overflow.
   * A `busy` answer that offers a notice names that subject (`invoke`) while the overflow has room, so that a caller
   * whose call another replica turned away may send it here by name.
   */
  admit(tool: string, cpuPool: CpuPool | undefined, route?: CallRoute): ErrorPayload | undefined {
    const cpuFull =
      cpuPool !== undefined && (route?.byName === true ? cpuPool.saturatedForNamed : cpuPool.saturated);
    if (this.state === 'running' && this.calls < this.concurrency && !cpuFull) {
      this.calls++;
      if (cpuPool === undefined) return undefined;
      this.cpuPool = cpuPool;
      cpuPool.hold();
      actorMetrics().setAdmissionQueueDepth(cpuPool.waiting());
      // a full thread pool owes a word even before it turns anyone away: another replica may have, and a CPU call
      // is long enough for a notice per call to cost nothing (a fast tool at its concurrency limit would pay per call)
      if (cpuPool.room() <= 0) this.owe(tool, cpuPool, 0);
      return undefined;
    }
    const offers = this.state === 'running';
    if (offers) this.owe(tool, cpuPool, 1);
    // named only when a call sent by name would be taken: a CPU call its pool's named overflow has room for
    const nameable =
      offers && route !== undefined && cpuFull && this.calls < this.concurrency && !cpuPool.saturatedForNamed;
    actorMetrics().toolCallRefused(tool);
    return {
      code: ErrorCode.Busy,
      message:
        this.state !== 'running'
          ? `worker ${this.workerId} is draining`
          : cpuFull
            ? `worker ${this.workerId} has all ${cpuPool?.threads} CPU threads busy and its queue full; try another replica`
            : `worker ${this.workerId} has ${this.calls} calls in flight (limit ${this.concurrency}); try another replica`,
      retryable: true,
      details: offers
        ? { worker_id: this.workerId, tool, offers, ...(nameable ? { invoke: route.invoke } : {}) }
        : { worker_id: this.workerId, tool },
    };
  }

  /**
   * Ends an admitted call (`cpuPool`: the pool it was admitted for, if CPU-bound). Returns the owed tools the worker
   * now has room for, or undefined: the worker tells their waiting callers. Each notice counts as answering `free` of the calls turned away; a tool stays owed until its
   * notices have answered them all, so a long queue of waiting callers is woken one freed slot after another.
   */
  leave(cpuPool?: CpuPool): RoomFor[] | undefined {
    this.calls--;
    cpuPool?.release();
    if (this.cpuPool !== undefined) actorMetrics().setAdmissionQueueDepth(this.cpuPool.waiting());
    if (this.owed.size === 0) return undefined;
    if (this.state !== 'running') {
      this.owed.clear();
      return undefined;
    }
    let room: RoomFor[] | undefined;
    for (const [tool, debt] of this.owed) {
      const free = Math.min(
        this.concurrency - this.calls,
        debt.pool === undefined ? Infinity : debt.pool.room(),
      );
      if (free < 1) continue;
      debt.waiting -= free;
      if (debt.waiting <= 0) this.owed.delete(tool);
      (room ??= []).push({ tool, free });
    }
    return room;
  }

  /** Counts `turnedAway` more calls of `tool` owed a notice (at least one, so that a full pool says when it frees). */
  private owe(tool: string, pool: CpuPool | undefined, turnedAway: number): void {
    const debt = this.owed.get(tool);
    if (debt === undefined) this.owed.set(tool, { pool, waiting: Math.max(1, turnedAway) });
    else debt.waiting = Math.max(1, debt.waiting + turnedAway);
  }
}
