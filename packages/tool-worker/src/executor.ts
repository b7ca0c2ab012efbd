import { performance } from 'node:perf_hooks';
import {
  AgentMeshError,
  Deadlines,
  ErrorCode,
  retry,
  toErrorPayload,
  type BlobStore,
  type Logger,
  type ToolInvocation,
  type ToolOutcome,
} from '@agentmesh/protocol';
import { TenantArtifacts } from './artifacts.js';
import { Attempt, HandlerContext, type RunCallScope } from './attempt.js';
import type { CallProgress, ProgressHub } from './call-scope.js';
import type { CpuPool } from './cpu-pool.js';
import type { Tool } from './define-tool.js';
import { byteLength, capForModel, outputText, successOutcomeJson } from './format.js';
import { classifyFailure } from './policy.js';

/** How outputs are sized: what goes to the artifact store and what reaches a model. */
export interface OutputLimits {
  artifactThresholdBytes: number;
  previewBytes: number;
  maxOutputBytes: number;
}

export interface ExecutorOptions {
  workerId: string;
  logger: Logger;
  progress: ProgressHub;
  limits: OutputLimits;
}

/** What one call needs while it runs, made once per call. */
interface CallRun {
  tool: Tool<any, any>;
  invocation: ToolInvocation;
  call: RunCallScope;
  args: unknown;
  timeoutMs: number;
  t0: number;
  /** The attempts made so far. */
  attempts: number;
  progress: CallProgress | undefined;
  logger: () => Logger;
}

/**
 * Runs one admitted call: validates its arguments, runs attempts under the tool's policy (each with its timeout,
 * on a piscina thread for CPU-bound tools), checks the output and moves a heavy one to the artifact store. This is
 * the one place a handler attempt is retried; only idempotent tools are, by their policy's `retry_on` classes.
 */
export class Executor {
  private readonly deadlines = new Deadlines();
  private pool: CpuPool | undefined;
  private blobs: BlobStore | undefined;
  /**
   * The output's JSON text (its preview) of each success outcome made here, for {@link outcomeJson}: the latest in
   * one slot (most calls are answered before the next outcome is made), earlier ones not yet answered in a WeakMap.
   */
  private readonly outputTexts = new WeakMap<ToolOutcome, string>();
  private latestOutcome: ToolOutcome | undefined;
  private latestText = '';

  constructor(private readonly options: ExecutorOptions) {}

  /** Gives the executor the resources opened at start. */
  attach(resources: { blobs: BlobStore; pool: CpuPool | undefined }): void {
    this.blobs = resources.blobs;
    this.pool = resources.pool;
  }

  get cpuPool(): CpuPool | undefined {
    return this.pool;
  }

  requireBlobs(): BlobStore {
    if (this.blobs === undefined)
      throw new AgentMeshError(ErrorCode.Unavailable, 'the tool worker is not started');
    return this.blobs;
  }

  /** `later`: the caller calls {@link ProgressHub.startAfterTurn} itself if the call goes on past this turn. */
  openProgress(invocation: ToolInvocation, sharedDedup = false, later = false): CallProgress | undefined {
    if (invocation.progress_subject === undefined) return undefined;
    return this.options.progress.open(
      invocation.progress_subject,
      invocation.call_id,
      invocation.tool,
      sharedDedup,
      later,
    );
  }

  /**
   * Runs the call to its outcome and releases its scope; never rejects (failures are error outcomes). One promise
   * chain from the first attempt to the outcome: no async frame, and an outcome known at once (arguments refused)
   * comes back without a promise.
   */
  run(
    tool: Tool<any, any>,
    invocation: ToolInvocation,
    call: RunCallScope,
    sharedDedup = false,
  ): ToolOutcome | Promise<ToolOutcome> {
    const run = this.openRun(tool, invocation, call, sharedDedup);
    const outcome = this.runOpened(run);
    // `started` only for a call that goes on past this turn
    if (outcome instanceof Promise && run.progress?.state === 'pending')
      this.options.progress.startAfterTurn();
    return outcome;
  }

  private runOpened(run: CallRun): ToolOutcome | Promise<ToolOutcome> {
    const { tool, invocation, call } = run;
    let first: Promise<unknown>;
    try {
      run.args = tool.parseArguments(invocation.arguments);
      if (call.aborted) first = Promise.reject(call.reason as Error);
      else {
        const current = this.startAttempt(run, 1);
        // a handler that answered at once: its outcome in this turn, with no promise step in between
        if (current.succeeded) return this.succeeded(run, current.output);
        first = current.promise;
      }
    } catch (error) {
      return this.failed(run, error);
    }
    return first.then(
      (output) => this.succeeded(run, output),
      (error: unknown) => this.retried(run, error),
    );
  }

  private openRun(
    tool: Tool<any, any>,
    invocation: ToolInvocation,
    call: RunCallScope,
    sharedDedup: boolean,
  ): CallRun {
    const t0 = performance.now();
    let logger: Logger | undefined;
    return {
      tool,
      invocation,
      call,
      args: undefined,
      timeoutMs: Math.min(invocation.timeout_ms ?? tool.policy.timeout_ms, tool.policy.timeout_ms),
      t0,
      attempts: 1,
      progress: this.openProgress(invocation, sharedDedup, true),
      logger: () =>
        (logger ??= this.options.logger.child({
          run_id: invocation.run_id,
          call_id: invocation.call_id,
          tool: tool.name,
        })),
    };
  }

  /** After a failed first attempt: the policy's retries, then the outcome. */
  private async retried(run: CallRun, first: unknown): Promise<ToolOutcome> {
    let output: unknown;
    try {
      output = await this.retryAttempts(run, first);
    } catch (error) {
      return this.failed(run, error);
    }
    return this.succeeded(run, output);
  }

  private succeeded(run: CallRun, output: unknown): ToolOutcome | Promise<ToolOutcome> {
    let made: ToolOutcome | Promise<ToolOutcome>;
    try {
      made = this.successOutcome(run, output, run.attempts);
    } catch (error) {
      return this.failed(run, error);
    }
    if (!(made instanceof Promise)) return this.completed(run, made);
    return made.then(
      (outcome) => this.completed(run, outcome),
      (error: unknown) => this.failed(run, error),
    );
  }

  private completed(run: CallRun, outcome: ToolOutcome): ToolOutcome {
    if (this.options.logger.isLevelEnabled('debug'))
      run.logger().debug({ attempts: run.attempts, elapsed_ms: outcome.elapsed_ms }, 'tool call completed');
    closeRun(run);
    return outcome;
  }

  private failed(run: CallRun, error: unknown): ToolOutcome {
    const outcome = this.errorOutcome(run.invocation, error, run.attempts, performance.now() - run.t0);
    run.logger().info({ code: outcome.error?.code, attempts: outcome.attempts }, 'tool call failed');
    closeRun(run);
    return outcome;
  }

  /**
   * After a failed first attempt: retries by the tool's policy through the shared {@link retry} helper (the first
   * failure stands in as its attempt 1), or throws the failure when the policy does not retry it.
   */
  private retryAttempts(run: CallRun, first: unknown): Promise<unknown> {
    const { tool, call } = run;
    const policy = tool.policy;
    const retryable = (error: unknown): boolean => {
      const failure = classifyFailure(error);
      return (
        failure !== 'cancelled' && tool.spec.idempotent && policy.retry_on.includes(failure) && !call.aborted
      );
    };
    if (policy.max_attempts <= 1 || !retryable(first)) return Promise.reject(first as Error);
    return retry(
      (attempt) => {
        if (attempt === 1) return Promise.reject(first as Error);
        run.attempts = attempt;
        return this.attempt(run, attempt);
      },
      {
        attempts: policy.max_attempts,
        baseMs: policy.backoff_ms,
        capMs: policy.max_backoff_ms,
        jitter: policy.jitter,
        signal: call.signal,
        retryable: (error) => retryable(error),
        onRetry: (error, attempt, delay) =>
          run
            .logger()
            .warn(
              { attempt, failure: classifyFailure(error), delay_ms: delay, err: error.message },
              'tool attempt failed, retrying',
            ),
      },
    );
  }

  private attempt(run: CallRun, attempt: number): Promise<unknown> {
    if (run.call.aborted) return Promise.reject(run.call.reason as Error);
    return this.startAttempt(run, attempt).promise;
  }

  /** Starts an attempt of a call that is not aborted; a handler that answers at once has settled it on return. */
  private startAttempt(run: CallRun, attempt: number): Attempt {
    const { tool, call, invocation } = run;
    // the first attempt starts as the call does: its clock is the call's
    const current = new Attempt(
      tool,
      call,
      this.deadlines,
      { timeoutMs: run.timeoutMs, attempt },
      attempt === 1 ? run.t0 : performance.now(),
    );
    try {
      let running: Promise<unknown>;
      if (tool.cpu !== undefined && this.pool !== undefined) {
        const context = {
          runId: invocation.run_id,
          callId: invocation.call_id,
          identity: invocation.identity,
          attempt,
          workerId: this.options.workerId,
        };
        running = this.pool.run(tool.cpu, run.args, context, current.scope.signal);
      } else {
        const context = new HandlerContext({
          blobs: this.requireBlobs(),
          invocation,
          attempt,
          workerId: this.options.workerId,
          scope: current.scope,
          logger: run.logger,
          progress: run.progress,
        });
        if (tool.callHandler === undefined) running = tool.runHandler(run.args, context);
        else {
          const result = tool.callHandler(run.args, context);
          if (!(result instanceof Promise)) {
            current.succeed(result);
            return current;
          }
          running = result;
        }
      }
      running.then(current.succeed, current.fail);
    } catch (error) {
      current.fail(error);
    }
    return current;
  }

  private successOutcome(
    run: CallRun,
    output: unknown,
    attempts: number,
  ): ToolOutcome | Promise<ToolOutcome> {
    const invocation = run.invocation;
    let text: string;
    try {
      text = outputText(output);
    } catch (error) {
      throw new AgentMeshError(
        ErrorCode.InvalidOutput,
        `tool "${invocation.tool}" returned output that is not JSON: ${(error as Error).message}`,
        { retryable: false },
      );
    }
    const { artifactThresholdBytes, maxOutputBytes } = this.options.limits;
    const limit = Math.min(artifactThresholdBytes, invocation.max_output_bytes ?? maxOutputBytes);
    if (text.length * 3 <= limit || byteLength(text) <= limit) {
      const outcome: ToolOutcome = {
        call_id: invocation.call_id,
        tool: invocation.tool,
        worker_id: this.options.workerId,
        is_error: false,
        output,
        preview: text,
        elapsed_ms: round(performance.now() - run.t0),
        attempts,
      };
      if (output !== undefined) this.keepOutputText(outcome, text);
      return outcome;
    }
    return this.artifactOutcome(run, { output, text }, attempts);
  }

  /**
   * The JSON text of a success outcome this executor made: its output's JSON, made once for the preview, goes into it
   * as it is (see {@link successOutcomeJson}). Undefined for any other outcome (a copy, an error): the caller writes
   * that one's JSON itself.
   */
  outcomeJson(outcome: ToolOutcome): string | undefined {
    let text: string | undefined;
    if (outcome === this.latestOutcome) {
      text = this.latestText;
      this.latestOutcome = undefined;
    } else text = this.outputTexts.get(outcome);
    return text === undefined ? undefined : successOutcomeJson(outcome, text);
  }

  private keepOutputText(outcome: ToolOutcome, text: string): void {
    if (this.latestOutcome !== undefined) this.outputTexts.set(this.latestOutcome, this.latestText);
    this.latestOutcome = outcome;
    this.latestText = text;
  }

  private async artifactOutcome(
    run: CallRun,
    made: { output: unknown; text: string },
    attempts: number,
  ): Promise<ToolOutcome> {
    const invocation = run.invocation;
    const { previewBytes, maxOutputBytes } = this.options.limits;
    const maxOutput = invocation.max_output_bytes ?? maxOutputBytes;
    const base = {
      call_id: invocation.call_id,
      tool: invocation.tool,
      worker_id: this.options.workerId,
      is_error: false,
      attempts,
    };
    try {
      const artifact = await new TenantArtifacts(this.requireBlobs(), {
        tenant: invocation.identity.tenant,
        runId: invocation.run_id,
        callId: invocation.call_id,
        tool: invocation.tool,
      }).put(made.text, {
        mime: typeof made.output === 'string' ? 'text/plain; charset=utf-8' : 'application/json',
      });
      return {
        ...base,
        artifact,
        preview: capForModel(made.text, Math.min(previewBytes, maxOutput), artifact),
        elapsed_ms: round(performance.now() - run.t0),
      };
    } catch (error) {
      run
        .logger()
        .error({ err: (error as Error).message }, 'artifact store failed; the output is only previewed');
      return {
        ...base,
        preview: capForModel(made.text, maxOutput),
        elapsed_ms: round(performance.now() - run.t0),
      };
    }
  }

  /** The outcome that reports `error` for this invocation. */
  errorOutcome(invocation: ToolInvocation, error: unknown, attempts: number, elapsedMs: number): ToolOutcome {
    const payload = toErrorPayload(error);
    payload.details = { ...payload.details, call_id: invocation.call_id, tool: invocation.tool };
    const maxOutput = invocation.max_output_bytes ?? this.options.limits.maxOutputBytes;
    return {
      call_id: invocation.call_id,
      tool: invocation.tool,
      worker_id: this.options.workerId,
      is_error: true,
      error: payload,
      preview: capForModel(`error [${payload.code}]: ${payload.message}`, maxOutput),
      elapsed_ms: round(elapsedMs),
      attempts,
    };
  }
}

/** Ends a call's progress notices and takes it off its worker's list. */
function closeRun(run: CallRun): void {
  run.progress?.close();
  run.call.release();
}

function round(ms: number): number {
  return Math.round(ms * 100) / 100;
}
