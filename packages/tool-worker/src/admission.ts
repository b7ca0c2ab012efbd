import { ErrorCode, actorMetrics, type ErrorPayload } from '@agentmesh/protocol';
import type { CpuPool } from './cpu-pool.js';

export type WorkerState = 'new' | 'starting' | 'running' | 'draining' | 'stopped';

/**
 * Which calls a worker takes: at most `concurrency` in flight, CPU-bound calls only while the thread pool's queue
 * has room, none unless it is running. A refused call is answered `busy` at once (retryable: it never started), so
 * the client sends it again and the tool's queue group gives it to another replica.
 */
export class Admission {
  state: WorkerState = 'new';
  private calls = 0;
  /** The CPU pool of the calls admitted so far, whose waiting calls are the admission queue depth gauge. */
  private cpuPool: CpuPool | undefined;

  constructor(
    private readonly workerId: string,
    readonly concurrency: number,
  ) {}

  /** Calls in flight now. */
  get inFlight(): number {
    return this.calls;
  }

  /** Takes a call (counted until {@link leave}), or returns the `busy` answer that refuses it. */
  admit(tool: string, cpuPool: CpuPool | undefined): ErrorPayload | undefined {
    const cpuFull = cpuPool?.saturated === true;
    if (this.state === 'running' && this.calls < this.concurrency && !cpuFull) {
      this.calls++;
      if (cpuPool !== undefined) {
        this.cpuPool = cpuPool;
        actorMetrics().setAdmissionQueueDepth(cpuPool.waiting(1));
      }
      return undefined;
    }
    return {
      code: ErrorCode.Busy,
      message:
        this.state !== 'running'
          ? `worker ${this.workerId} is draining`
          : cpuFull
            ? `worker ${this.workerId} has all ${cpuPool?.threads} CPU threads busy and its queue full; try another replica`
            : `worker ${this.workerId} has ${this.calls} calls in flight (limit ${this.concurrency}); try another replica`,
      retryable: true,
      details: { worker_id: this.workerId, tool },
    };
  }

  leave(): void {
    this.calls--;
    if (this.cpuPool !== undefined) actorMetrics().setAdmissionQueueDepth(this.cpuPool.waiting());
  }
}
