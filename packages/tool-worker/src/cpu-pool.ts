import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import type { Piscina } from 'piscina';
import { AgentMeshError, ErrorCode, isAbortError } from '@agentmesh/protocol';
import type { CpuToolContext } from './define-tool.js';

type CpuResult =
  | { ok: true; value: unknown }
  | {
      ok: false;
      error: {
        name: string;
        message: string;
        code?: string;
        retryable?: boolean;
        status?: number;
        details?: Record<string, unknown>;
      };
    };

const KNOWN_CODES: ReadonlySet<string> = new Set(Object.values(ErrorCode));

/** Rebuilds an error thrown on a thread: agentmesh codes become AgentMeshError, others keep code and status. */
function reviveThreadError(e: Extract<CpuResult, { ok: false }>['error']): Error {
  if (e.code !== undefined && KNOWN_CODES.has(e.code))
    return new AgentMeshError(e.code, e.message, {
      ...(e.retryable === undefined ? {} : { retryable: e.retryable }),
      ...(e.details === undefined ? {} : { details: e.details }),
    });
  const error = new Error(e.message) as Error & { code?: string; status?: number };
  error.name = e.name;
  if (e.code !== undefined) error.code = e.code;
  if (e.status !== undefined) error.status = e.status;
  return error;
}

const RUNNER = new URL('../runtime/cpu-runner.mjs', import.meta.url);
const requireCjs = createRequire(import.meta.url);

export interface CpuPoolOptions {
  /** Threads for CPU-bound tools (default: available parallelism). */
  threads?: number;
  /** CPU calls that may wait for a thread beyond those running (default: the thread count). */
  queueDepth?: number;
  /**
   * CPU calls sent to this worker by name (its own subject) that may wait beyond `queueDepth` (default: threads +
   * queueDepth): a caller names a worker when its replicas turned the call away full, so queueing it here beats
   * sending it round again.
   */
  namedDepth?: number;
  /**
   * @deprecated No effect: the pool's threads stay up from its first CPU call until {@link CpuPool.destroy} (a thread
   * torn down when idle made the next CPU call wait for a new one, tens of milliseconds).
   */
  idleTimeoutMs?: number;
}

/**
 * The piscina pool of one worker. Its threads all start with the first CPU call and stay warm while the worker runs,
 * so a call never waits for a thread to start (a thread and the tool's module take tens of milliseconds), after an
 * idle spell or while a burst fills the pool. An aborted task that is already running has its thread terminated and
 * replaced at once, so a runaway handler or regex does not keep spinning after its timeout or cancel.
 */
export class CpuPool {
  private pool: Piscina | undefined;
  readonly threads: number;
  readonly queueDepth: number;
  readonly namedDepth: number;
  private tasks = 0;
  private held = 0;

  constructor(options: CpuPoolOptions = {}) {
    this.threads = Math.max(1, options.threads ?? availableParallelism());
    this.queueDepth = Math.max(0, options.queueDepth ?? this.threads);
    this.namedDepth = Math.max(0, options.namedDepth ?? this.threads + this.queueDepth);
  }

  /**
   * The piscina pool, made with the first CPU call (a worker that gets none never loads piscina) with all its threads,
   * which piscina keeps at that number: it never retires an idle one, and replaces a terminated one at once.
   */
  private threadPool(): Piscina {
    if (this.pool !== undefined) return this.pool;
    const { Piscina: Pool } = requireCjs('piscina') as typeof import('piscina');
    this.pool = new Pool({
      filename: RUNNER.href,
      minThreads: this.threads,
      maxThreads: this.threads,
      idleTimeout: Infinity,
    });
    return this.pool;
  }

  async run(
    cpu: { module: string; export: string },
    args: unknown,
    context: CpuToolContext,
    signal: AbortSignal,
  ): Promise<unknown> {
    let result: CpuResult;
    this.tasks++;
    try {
      result = (await this.threadPool().run(
        { module: cpu.module, exportName: cpu.export, args, context },
        { signal },
      )) as CpuResult;
    } catch (error) {
      if (isAbortError(error) || signal.aborted) throw signal.reason ?? AgentMeshError.from(error);
      throw new AgentMeshError(ErrorCode.ToolError, `CPU thread failed: ${(error as Error).message}`, {
        cause: error,
      });
    } finally {
      this.tasks--;
    }
    if (result.ok) return result.value;
    throw reviveThreadError(result.error);
  }

  /**
   * Counts a call admitted for the pool until {@link release}: from its admission, before its task reaches the pool
   * (a burst of calls is admitted in one event loop turn, before any of them runs), until it has left.
   */
  hold(): void {
    this.held++;
  }

  release(): void {
    this.held = Math.max(0, this.held - 1);
  }

  /** CPU calls held or running now: the admitted ones, or more when calls run without admission (embedded). */
  private get load(): number {
    return Math.max(this.tasks, this.held);
  }

  /**
   * Whether every thread is busy and the queue is full: the worker then answers new CPU calls `busy`, so that the
   * queue group's other replicas take them and CPU work spreads evenly.
   */
  get saturated(): boolean {
    return this.load >= this.threads + this.queueDepth;
  }

  /** Whether the pool is full even for a call sent to this worker by name: its queue and the named overflow. */
  get saturatedForNamed(): boolean {
    return this.load >= this.threads + this.queueDepth + this.namedDepth;
  }

  /** CPU calls the pool would still take before it is saturated, counting `arriving` more about to be handed to it. */
  room(arriving = 0): number {
    return this.threads + this.queueDepth - this.load - arriving;
  }

  /** CPU calls waiting for a thread now, counting `arriving` more that are about to be handed to the pool. */
  waiting(arriving = 0): number {
    return Math.max(0, this.load + arriving - this.threads);
  }

  /** Threads alive right now. */
  get liveThreads(): number {
    return this.pool?.threads.length ?? 0;
  }

  async destroy(): Promise<void> {
    await this.pool?.destroy().catch((error: unknown) => {
      throw new AgentMeshError(ErrorCode.Internal, `piscina pool did not stop: ${(error as Error).message}`);
    });
  }
}
