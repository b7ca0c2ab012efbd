import type { Bus } from './bus/types.js';
import { AgentMeshError, ErrorCode } from './errors.js';
import { backoffDelay, retry } from './retry.js';
import { sleep } from './timing.js';
import { capacityWaiters } from './tool-capacity.js';
import type { ToolInvocation, ToolInvocationInput, ToolOutcome, ToolProgress } from './schemas.js';
import { DEFAULT_PREFIX, subjects } from './subjects.js';
import { progressRouter, type ProgressRouter, type Send, type SendResult } from './tool-progress-router.js';
import { checkInvocationInput, sendOnce, sendWatched } from './tool-wire.js';

export { parseToolInvocation } from './tool-wire.js';

export interface InvokeToolOptions {
  prefix?: string;
  /** Overall deadline for the call, every attempt and re-send included (default 60 s). */
  timeoutMs?: number;
  signal?: AbortSignal;
  /**
   * Called with the worker's `started`, `progress` and `heartbeat` notices. A worker that answers within the event
   * loop turn the call began in sends no `started`; it is then made from the outcome, so every call reports one.
   */
  onProgress?: (progress: ToolProgress) => void;
  /**
   * Whether the call may be re-sent to another replica after a worker was lost while it may have run it (same
   * idempotency key). A non-idempotent call is re-sent only when its workers keep outcomes in a store shared by all
   * replicas (they say so with `dedup: 'shared'`): the replica that gets it answers the stored outcome, waits for the
   * first run, or refuses it as `worker_lost`. Otherwise it fails with a non-retryable `worker_lost`.
   */
  idempotent?: boolean;
  /**
   * The call may have been sent before, under the same idempotency key, by a caller that was lost (a resumed run
   * sending again the calls of a batch that has no result yet). A non-idempotent call is then treated as one whose
   * worker was lost: a replica whose shared outcome store cannot tell yet is asked again until it can, and the call
   * fails as `worker_lost` (may have run), never as "did not run".
   */
  sentBefore?: boolean;
  /** A worker that has sent nothing (no `started`, no heartbeat) for this long is taken as lost (default 3000 ms). */
  lostAfterMs?: number;
  /**
   * How long `no_responders` (no worker serves the tool right now) is retried before failing (default 2000 ms,
   * never past the deadline): long enough for a replica to come back, short for a tool nobody serves.
   */
  noRespondersMs?: number;
}

/**
 * Calls one tool through whichever worker replica its queue group picks and returns the outcome. Tool failures
 * (invalid arguments, handler errors, timeouts inside the worker) come back as outcomes with `is_error`.
 * Transport failures throw an {@link AgentMeshError} that names the call id.
 *
 * This client re-sends a call only when it provably never started: `busy` (a worker's admission refused it),
 * `no_responders`, or a shared outcome store that could not yet tell; these go through {@link retry} with short
 * jittered backoff until the deadline. A worker that goes silent after `started` is lost; the call is re-sent at
 * once to another replica only when `idempotent` or when its workers deduplicate it through their shared outcome
 * store (same idempotency key, so it runs at most once); otherwise it fails with `worker_lost`. Handler attempts are
 * retried inside the worker by the tool's policy, never here.
 */
export function invokeTool(
  bus: Bus,
  invocation: ToolInvocationInput,
  options: InvokeToolOptions = {},
): Promise<ToolOutcome> {
  // not an async function: the outcome of the first send is returned as it is, without one more promise around it
  let call: ClientCall;
  try {
    call = new ClientCall(bus, checkInvocationInput(invocation), options);
  } catch (error) {
    return Promise.reject(error as Error);
  }
  if (options.signal?.aborted === true)
    return call.resend(new AgentMeshError(ErrorCode.Cancelled, 'aborted before the first send'));
  return call.firstSend();
}

const toolSubjects = new Map<string, Map<string, string>>();

/**
 * `<prefix>.tool.invoke.<tool>`, one string per tool: a bus that looks subjects up (the in-process bus's routes) then
 * hashes it once, not on every call.
 */
function toolSubject(prefix: string, tool: string): string {
  let byTool = toolSubjects.get(prefix);
  if (byTool === undefined) {
    if (toolSubjects.size >= 64) toolSubjects.clear();
    toolSubjects.set(prefix, (byTool = new Map()));
  }
  let subject = byTool.get(tool);
  if (subject === undefined) {
    if (byTool.size >= 4096) byTool.clear();
    byTool.set(tool, (subject = `${prefix}.tool.invoke.${tool}`));
  }
  return subject;
}

/** A re-sent call of a non-idempotent tool found its shared outcome store not back yet: ask again. */
const STORE_NOT_READY = 'outcome_store_not_ready';

/** One call to a tool across its sends: what to send, how long, and what the earlier sends found. */
class ClientCall {
  readonly timeoutMs: number;
  private readonly subject: string;
  /** The subject of the worker whose capacity notice woke this call: its next send goes there, once. */
  private target: string | undefined;
  private readonly idempotencyKey: string;
  private readonly deadline: number;
  /** Date.now() when the call began: the first send's clock. */
  private readonly began: number;
  private readonly lostAfterMs: number;
  private readonly noRespondersMs: number;
  private readonly onProgress: ((progress: ToolProgress) => void) | undefined;
  private readonly router: ProgressRouter;
  private attempt: number;
  private sends = 0;
  private resends = 0;
  private firstNoResponders: number | undefined;
  private lostWorkers: string[] | undefined;
  private lostNonIdempotent: Extract<SendResult, { kind: 'lost' }> | undefined;
  /** A non-idempotent call that a lost caller may have sent before ({@link InvokeToolOptions.sentBefore}). */
  private readonly sentBefore: boolean;
  /** A replica answered that its shared outcome store could not tell whether the call ran. */
  private storeCouldNotTell = false;

  constructor(
    bus: Bus,
    private readonly body: ToolInvocationInput,
    private readonly options: InvokeToolOptions,
  ) {
    this.idempotencyKey = body.idempotency_key ?? `${body.run_id}:${body.call_id}`;
    this.subject = toolSubject(options.prefix ?? DEFAULT_PREFIX, body.tool);
    this.timeoutMs = options.timeoutMs ?? 60_000;
    this.began = Date.now();
    this.deadline = this.began + this.timeoutMs;
    this.lostAfterMs = Math.max(50, options.lostAfterMs ?? 3000);
    this.noRespondersMs = options.noRespondersMs ?? 2000;
    this.attempt = body.attempt ?? 1;
    this.router = progressRouter(bus);
    this.sentBefore = options.sentBefore === true && options.idempotent !== true;
    const userProgress = options.onProgress;
    this.onProgress =
      userProgress === undefined
        ? undefined
        : (progress: ToolProgress) => {
            try {
              userProgress(progress);
            } catch {
              // a failing progress listener must not break the call
            }
          };
  }

  /**
   * After a failed first send: sends again through {@link retry} while the call provably never started (the first
   * failure stands in as its attempt 1), then throws the error the caller gets.
   */
  async resend(first: AgentMeshError): Promise<ToolOutcome> {
    const signal = this.options.signal;
    try {
      if (!this.mayResend(first) && signal?.aborted !== true) throw first;
      return await retry((attempt) => (attempt === 1 ? Promise.reject(first) : this.sendUntilAnswered()), {
        timeoutMs: Math.max(0, this.deadline - Date.now()),
        baseMs: 2,
        capMs: 50,
        jitter: 0.5,
        ...(signal === undefined ? {} : { signal }),
        retryable: (error) => this.mayResend(error),
        delayHint: (error) => this.delayHint(error),
        wait: (delayMs, error, signal) => this.pause(delayMs, error, signal),
      });
    } catch (error) {
      throw this.finalError(AgentMeshError.from(error));
    }
  }

  /**
   * The first send, as {@link sendUntilAnswered} and then {@link resend} on a failure, in one promise: the common call,
   * answered at once, settles the caller's promise with no promise in between.
   */
  firstSend(): Promise<ToolOutcome> {
    const now = this.began;
    if (this.deadline - now <= 0) return this.resend(this.timedOut());
    return new Promise<ToolOutcome>((resolve) => {
      try {
        sendWatched(this.router.bus, this.router, this.send(now, true), (result) =>
          resolve(this.afterFirstSend(result)),
        );
      } catch (error) {
        resolve(this.resend(AgentMeshError.from(error)));
      }
    });
  }

  private afterFirstSend(result: SendResult): ToolOutcome | Promise<ToolOutcome> {
    const failed = (error: unknown) => this.resend(AgentMeshError.from(error));
    try {
      if (result.kind === 'outcome') return this.answered(result);
      if (result.kind === 'error') throw this.sendFailed(result.error);
      this.workerLost(result);
    } catch (error) {
      return failed(error);
    }
    return this.sendUntilAnswered().catch(failed);
  }

  /** Sends the call (again at once after a lost worker, when that is safe) until an outcome or an error. */
  sendUntilAnswered(): Promise<ToolOutcome> {
    const now = Date.now();
    if (this.deadline - now <= 0) return Promise.reject(this.timedOut());
    return sendOnce(this.router.bus, this.router, this.send(now)).then((result) => {
      if (result.kind === 'error') throw this.sendFailed(result.error);
      if (result.kind === 'outcome') return this.answered(result);
      this.workerLost(result);
      return this.sendUntilAnswered();
    });
  }

  /** `checked`: the invocation was checked in this turn (the first send, made as the call begins). */
  private send(now: number, checked = false): Send {
    this.sends++;
    const target = this.target;
    this.target = undefined;
    return {
      subject: this.subject,
      target,
      invocation: this.body,
      checked,
      attempt: this.attempt,
      idempotencyKey: this.idempotencyKey,
      idempotent: this.options.idempotent === true,
      remainingMs: this.deadline - now,
      lostAfterMs: this.lostAfterMs,
      now,
      signal: this.options.signal,
      onProgress: this.onProgress,
    };
  }

  private answered(result: Extract<SendResult, { kind: 'outcome' }>): ToolOutcome {
    const refused = result.outcome.error;
    if (
      refused?.code === ErrorCode.Unavailable &&
      this.mayHaveRun() &&
      refused.retryable &&
      result.outcome.dedup === 'shared'
    ) {
      this.storeCouldNotTell = true;
      throw new AgentMeshError(STORE_NOT_READY, refused.message, { retryable: true });
    }
    if (!result.sawStarted)
      this.onProgress?.({
        kind: 'started',
        call_id: this.body.call_id,
        tool: this.body.tool,
        worker_id: result.outcome.worker_id,
      });
    return result.outcome;
  }

  /** After a lost worker: re-sent at once when that is safe, else a non-retryable `worker_lost`. */
  private workerLost(result: Extract<SendResult, { kind: 'lost' }>): void {
    (this.lostWorkers ??= []).push(
      result.workerId === undefined ? 'the worker' : `worker ${result.workerId}`,
    );
    if (this.options.idempotent !== true) {
      const protectedByStore =
        result.dedup || (result.workerId === undefined && this.router.sharedDedup(this.subject));
      if (!protectedByStore)
        throw workerLost(this.body, result, this.attempt, 'so the call was not sent again');
      this.lostNonIdempotent ??= result;
    }
    this.resends++;
    this.attempt++;
  }

  private sendFailed(error: AgentMeshError): AgentMeshError {
    const body = this.body;
    if (error.code === ErrorCode.Busy) {
      this.firstNoResponders = undefined;
      return error;
    }
    if (error.code === ErrorCode.NoResponders) {
      this.firstNoResponders ??= Date.now();
      return error;
    }
    if (error.code === ErrorCode.Cancelled && this.options.signal?.aborted)
      return callError(body, ErrorCode.Cancelled, 'was cancelled', { cause: error });
    if (error.code === ErrorCode.Timeout) return this.timedOut(error);
    return callError(body, error.code, `failed: ${error.message}`, {
      retryable: error.retryable,
      extra: error.details ?? {},
      cause: error,
    });
  }

  /** Whether a failed send may go again: only when the call provably never started. */
  mayResend(error: AgentMeshError): boolean {
    if (error.code === ErrorCode.Busy || error.code === STORE_NOT_READY) return true;
    if (error.code !== ErrorCode.NoResponders || this.firstNoResponders === undefined) return false;
    return Date.now() - this.firstNoResponders < Math.min(this.noRespondersMs, this.timeoutMs);
  }

  /**
   * No worker right now waits longer between sends than a busy one; a store that is not back longer still. A worker
   * that will say when it has room again (`offers`) is asked again once at once (another replica may have room), then
   * only on its notice or after a longer backoff.
   */
  delayHint(error: AgentMeshError): number | undefined {
    if (error.code === ErrorCode.Busy && offersCapacity(error) && this.sends > 1)
      return backoffDelay(this.sends - 1, { baseMs: 50, capMs: 1000, jitter: 0.5 });
    if (error.code === ErrorCode.NoResponders)
      return backoffDelay(this.sends, { baseMs: 2, capMs: 250, jitter: 0.5 });
    if (error.code === STORE_NOT_READY)
      return backoffDelay(this.sends, { baseMs: 100, capMs: 1000, jitter: 0.5 });
    return undefined;
  }

  /**
   * Waits before the next send: not at all when another worker of the tool, full too, can be named (see
   * {@link CapacityWaiters.fullPeer}); else until a worker that turned the call away says it has room, or the delay
   * is over.
   */
  private async pause(
    delayMs: number,
    error: AgentMeshError,
    signal: AbortSignal | undefined,
  ): Promise<void> {
    if (error.code !== ErrorCode.Busy || !offersCapacity(error)) return sleep(delayMs, signal);
    const waiters = capacityWaiters(this.router.bus);
    const refuser = waiters.noteBusy(this.subject, error.details);
    this.target = waiters.fullPeer(this.subject, refuser);
    if (this.target !== undefined) return;
    this.target =
      (await waiters.wait(
        subjects(this.options.prefix).toolCapacity(this.body.tool),
        this.subject,
        delayMs,
        signal,
      )) ?? waiters.fullPeer(this.subject, refuser);
  }

  /** The error the caller gets once no more sends are made. */
  finalError(error: AgentMeshError): AgentMeshError {
    const body = this.body;
    if (this.options.signal?.aborted && error.code !== ErrorCode.Cancelled)
      return callError(body, ErrorCode.Cancelled, 'was cancelled', { cause: error });
    if (error.code === ErrorCode.Cancelled && !(error.details?.['call_id'] === body.call_id))
      return callError(body, ErrorCode.Cancelled, 'was cancelled', { cause: error });
    // the deadline can pass while the call waits to ask the store again: the store still could not tell
    const storeSilent =
      error.code === STORE_NOT_READY || (error.code === ErrorCode.Timeout && this.storeCouldNotTell);
    if (storeSilent && this.mayHaveRun())
      return this.mayHaveRunError('and its outcome store could not tell in time');
    if (error.code === ErrorCode.NoResponders) {
      if (this.deadline - Date.now() <= 0 && this.timeoutMs > this.noRespondersMs)
        return this.timedOut(error);
      if (this.mayHaveRun()) return this.mayHaveRunError('and no replica was left to take it again');
      return new AgentMeshError(
        ErrorCode.NoResponders,
        this.lostWorkers === undefined
          ? `no worker serves tool "${body.tool}" (call ${body.call_id}): the tool is unknown or none of its workers is running`
          : `no worker is left to take call ${body.call_id} of tool "${body.tool}" after ${this.lostWorkers.join(', ')} was lost`,
        {
          retryable: false,
          details: { call_id: body.call_id, tool: body.tool, resends: this.resends },
          cause: error,
        },
      );
    }
    if (error.code === ErrorCode.Busy) return this.timedOut(error);
    return error;
  }

  /** Whether an earlier send of this non-idempotent call may have run it: its worker, or the caller before, was lost. */
  private mayHaveRun(): boolean {
    return this.lostNonIdempotent !== undefined || this.sentBefore;
  }

  /** The non-retryable `worker_lost` of a call that may have run, saying what was lost and `then` what happened. */
  private mayHaveRunError(then: string): AgentMeshError {
    if (this.lostNonIdempotent !== undefined)
      return workerLost(this.body, this.lostNonIdempotent, this.attempt, then);
    return callError(
      this.body,
      ErrorCode.WorkerLost,
      `was sent before by a caller that was lost; the tool is not idempotent and may have run, ${then}`,
      { extra: { attempt: this.attempt } },
    );
  }

  private timedOut(cause?: unknown): AgentMeshError {
    return callError(this.body, ErrorCode.Timeout, `got no outcome within ${this.timeoutMs} ms`, {
      extra: { timeout_ms: this.timeoutMs },
      cause,
    });
  }
}

/** Whether a worker's `busy` answer says it will announce when it has room again. */
function offersCapacity(error: AgentMeshError): boolean {
  return error.details?.['offers'] === true;
}

/** What errors name of a call. */
type CallNames = Pick<ToolInvocation, 'call_id' | 'tool'>;

function callError(
  body: CallNames,
  code: string,
  what: string,
  more: { retryable?: boolean; extra?: Record<string, unknown>; cause?: unknown } = {},
): AgentMeshError {
  const { extra = {}, cause } = more;
  return new AgentMeshError(code, `call ${body.call_id} of tool "${body.tool}" ${what}`, {
    retryable: more.retryable ?? false,
    details: { call_id: body.call_id, tool: body.tool, ...extra },
    ...(cause === undefined ? {} : { cause }),
  });
}

function workerLost(
  body: CallNames,
  lost: Extract<SendResult, { kind: 'lost' }>,
  attempt: number,
  then: string,
): AgentMeshError {
  const who = lost.workerId === undefined ? 'the worker' : `worker ${lost.workerId}`;
  return new AgentMeshError(
    ErrorCode.WorkerLost,
    `${who} was lost during call ${body.call_id} of tool "${body.tool}" (${lost.why}); the tool is not idempotent ` +
      `and may have run, ${then}`,
    {
      retryable: false,
      details: { call_id: body.call_id, tool: body.tool, worker_id: lost.workerId, attempt },
    },
  );
}
