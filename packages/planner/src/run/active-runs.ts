import { setMaxListeners } from 'node:events';
import { AgentMeshError, ErrorCode } from '@agentmesh/protocol';
import type { StopReason } from './context.js';

/** A run in progress in this planner: its abort controller, why it was stopped, and its timer. */
export interface ActiveRun {
  readonly controller: AbortController;
  stop: StopReason | undefined;
  cleanup: () => void;
  /** Starts the run's clock, if its start left it for later: it times out at its deadline. */
  startClock: () => void;
}

/** The runs this planner is executing, each with its timeout clock and its link to the caller's signal. */
export class ActiveRuns {
  private readonly runs = new Map<string, ActiveRun>();

  get size(): number {
    return this.runs.size;
  }

  /**
   * Starts a run's clock: it times out at `deadline` (a `Date.now()` time) and is cancelled when `external` aborts.
   * With `clockLater` the run is cancellable at once and its clock starts at {@link ActiveRun.startClock} (a new
   * durable run's, once its `run.accepted` is stored: its timer is not made on the path to that event).
   */
  start(
    runId: string,
    timeoutMs: number,
    deadline: number,
    external: AbortSignal | undefined,
    clockLater = false,
  ): ActiveRun {
    let controller: AbortController | undefined;
    let timer: NodeJS.Timeout | undefined;
    let ended = false;
    const run: ActiveRun = {
      // made on first use (a new run's setup, after its run.accepted is stored; or a cancel or fence before that)
      get controller() {
        if (controller === undefined) {
          controller = new AbortController();
          // Every tool call, model call and wait of the run listens on this one signal: dozens at once is normal.
          setMaxListeners(0, controller.signal);
        }
        return controller;
      },
      stop: undefined,
      cleanup: () => undefined,
      startClock: () => {
        if (timer !== undefined || ended) return;
        timer = setTimeout(
          () => {
            run.stop ??= { status: 'timeout', reason: `timeout_ms (${timeoutMs}) elapsed` };
            run.controller.abort(
              new AgentMeshError(ErrorCode.Timeout, `run timed out after ${timeoutMs} ms`),
            );
          },
          Math.max(1, deadline - Date.now()),
        );
        timer.unref?.();
      },
    };
    const onExternal = () => {
      const reason =
        external?.reason instanceof Error ? external.reason.message : String(external?.reason ?? 'aborted');
      run.stop ??= { status: 'cancelled', reason: `cancelled: ${reason}` };
      run.controller.abort(external?.reason);
    };
    if (external?.aborted) onExternal();
    else external?.addEventListener('abort', onExternal, { once: true });
    run.cleanup = () => {
      ended = true;
      clearTimeout(timer);
      external?.removeEventListener('abort', onExternal);
    };
    this.runs.set(runId, run);
    if (!clockLater) run.startClock();
    return run;
  }

  end(runId: string): void {
    this.runs.get(runId)?.cleanup();
    this.runs.delete(runId);
  }

  /** Cancels a run of this planner; false when it is not running here. */
  cancel(runId: string, reason: string): boolean {
    const run = this.runs.get(runId);
    if (run === undefined) return false;
    run.stop ??= { status: 'cancelled', reason: `cancelled: ${reason}` };
    run.controller.abort(new AgentMeshError(ErrorCode.Cancelled, reason));
    return true;
  }
}
