import {
  AgentMeshError,
  ErrorCode,
  SlotTable,
  parseJson,
  type BusMessage,
  type Logger,
} from '@agentmesh/protocol';
import { RunCallScope } from './attempt.js';

const CANCELLED_RUNS_KEPT = 1024;
const CANCELLED_RUN_TTL_MS = 10 * 60_000;

export function cancelledError(runId: string, reason: string | undefined): AgentMeshError {
  return new AgentMeshError(
    ErrorCode.Cancelled,
    `the call was cancelled with its run ${runId}${reason ? `: ${reason}` : ''}`,
    { retryable: false, details: { run_id: runId } },
  );
}

/**
 * The scopes of the calls a worker holds, from the moment a call is admitted until it is answered (waiting on a
 * claim or a duplicate included), so that a run's cancel reaches each of them wherever it waits; and the runs
 * cancelled lately, so that a call crossing its run's cancel on the wire is not started.
 */
export class RunCancels {
  private readonly calls = new SlotTable<RunCallScope>();
  private readonly cancelledRuns = new Map<string, { reason: string | undefined; at: number }>();

  constructor(
    private readonly prefix: string,
    private readonly logger: Logger,
  ) {}

  /** The scope of a new call of `runId` (held until its `release()`), aborted at once when that run was cancelled lately. */
  open(runId: string): RunCallScope {
    const call = new RunCallScope(runId);
    call.holdIn(this.calls, this.calls.add(call));
    const cancelled = this.cancelledRuns.size === 0 ? undefined : this.cancelledRuns.get(runId);
    if (cancelled !== undefined) call.abort(cancelledError(runId, cancelled.reason));
    return call;
  }

  /** Handles a message on `<prefix>.runs.*.cancel`: aborts every call of that run held now. */
  onCancel(msg: BusMessage): void {
    const head = `${this.prefix}.runs.`;
    if (!msg.subject.startsWith(head) || !msg.subject.endsWith('.cancel')) return;
    const runId = msg.subject.slice(head.length, -'.cancel'.length);
    const reason = cancelReason(msg);
    this.remember(runId, reason);
    const calls: RunCallScope[] = [];
    this.calls.forEach((call) => {
      if (call.runId === runId) calls.push(call);
    });
    if (calls.length === 0) return;
    this.logger.info({ run_id: runId, calls: calls.length, reason }, 'cancelling the calls of a run');
    for (const call of calls) call.abort(cancelledError(runId, reason));
  }

  private remember(runId: string, reason: string | undefined): void {
    this.cancelledRuns.delete(runId);
    this.cancelledRuns.set(runId, { reason, at: Date.now() });
    for (const [id, entry] of this.cancelledRuns) {
      if (this.cancelledRuns.size <= CANCELLED_RUNS_KEPT && Date.now() - entry.at < CANCELLED_RUN_TTL_MS)
        break;
      this.cancelledRuns.delete(id);
    }
  }
}

function cancelReason(msg: BusMessage): string | undefined {
  try {
    const body =
      msg.data.length === 0 ? {} : (parseJson(msg.text(), 'cancel request') as { reason?: unknown });
    return typeof body.reason === 'string' ? body.reason : undefined;
  } catch {
    return undefined; // a cancel with a malformed body still cancels
  }
}
