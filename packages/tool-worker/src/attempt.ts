import { performance } from 'node:perf_hooks';
import {
  AgentMeshError,
  ErrorCode,
  type BlobStore,
  type Deadline,
  type Deadlines,
  type Logger,
  type ToolInvocation,
} from '@agentmesh/protocol';
import { TenantArtifacts, type ArtifactStore } from './artifacts.js';
import { AbortScope, type CallProgress } from './call-scope.js';
import type { Tool, ToolContext } from './define-tool.js';
import { classifyFailure } from './policy.js';

const KNOWN_CODES: ReadonlySet<string> = new Set(Object.values(ErrorCode));

/** The scope of one call, which its run's cancel aborts, held among the calls of its worker until released. */
export class RunCallScope extends AbortScope {
  private held: { delete(handle: number): void } | undefined;
  private handle = Number.NaN;

  constructor(readonly runId: string) {
    super();
  }

  /** Records where the scope is held (by {@link RunCancels}). */
  holdIn(table: { delete(handle: number): void }, handle: number): void {
    this.held = table;
    this.handle = handle;
  }

  /** Takes the call off its worker's list; safe to call more than once. */
  release(): void {
    const held = this.held;
    this.held = undefined;
    held?.delete(this.handle);
  }
}

/**
 * One attempt of a call: settles with the checked output, or rejects on the handler's failure, the attempt's
 * timeout (one shared timer for all attempts) or the call's abort, whichever comes first.
 */
export class Attempt implements Deadline {
  readonly scope = new AbortScope();
  readonly at: number;
  private readonly deadline: number;
  private settled = false;
  /** Set when the attempt succeeded: {@link output} is then its checked output. */
  succeeded = false;
  output: unknown;
  private failure: unknown;
  /** Made when first asked for: an attempt that settles before anyone waits on it needs none. */
  private settlement: Promise<unknown> | undefined;
  private resolve: ((output: unknown) => void) | undefined;
  private reject: ((error: unknown) => void) | undefined;

  constructor(
    private readonly tool: Tool<any, any>,
    private readonly call: AbortScope,
    private readonly deadlines: Deadlines,
    private readonly limit: { timeoutMs: number; attempt: number },
    /** performance.now() when the attempt starts, when the caller has it at hand. */
    startedAt: number = performance.now(),
  ) {
    this.at = startedAt + limit.timeoutMs;
    this.deadline = deadlines.add(this);
    call.addAbortListener(this.abort);
  }

  expire(): void {
    const { timeoutMs, attempt } = this.limit;
    this.abort(
      new AgentMeshError(
        ErrorCode.Timeout,
        `tool "${this.tool.name}" timed out after ${timeoutMs} ms (attempt ${attempt} of ${this.tool.policy.max_attempts})`,
        { details: { timeout_ms: timeoutMs, attempt } },
      ),
    );
  }

  private readonly abort = (reason: unknown): void => {
    this.scope.abort(reason);
    this.fail(reason);
  };

  private end(): boolean {
    if (this.settled) return false;
    this.settled = true;
    this.deadlines.delete(this.deadline);
    this.call.removeAbortListener(this.abort);
    return true;
  }

  /** Settles with the checked output, or rejects with the attempt's failure. */
  get promise(): Promise<unknown> {
    if (this.settlement !== undefined) return this.settlement;
    if (this.succeeded) return (this.settlement = Promise.resolve(this.output));
    if (this.settled) return (this.settlement = Promise.reject(this.failure as Error));
    return (this.settlement = new Promise<unknown>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    }));
  }

  readonly fail = (error: unknown): void => {
    if (this.end()) this.failed(toToolError(error, this.tool.name));
  };

  readonly succeed = (output: unknown): void => {
    if (!this.end()) return;
    try {
      this.output = this.tool.checkOutput(output);
    } catch (error) {
      this.failed(toToolError(error, this.tool.name));
      return;
    }
    this.succeeded = true;
    this.resolve?.(this.output);
  };

  private failed(error: AgentMeshError): void {
    this.failure = error;
    this.reject?.(error);
  }
}

/** What a handler's context is made of. */
export interface HandlerContextParts {
  blobs: BlobStore;
  invocation: ToolInvocation;
  attempt: number;
  workerId: string;
  scope: AbortScope;
  logger: () => Logger;
  progress: CallProgress | undefined;
}

/** The {@link ToolContext} of one attempt; the signal, logger and artifact store are made on first use. */
export class HandlerContext implements ToolContext {
  private artifactStore: TenantArtifacts | undefined;
  readonly runId: string;
  readonly callId: string;
  readonly identity: ToolInvocation['identity'];
  readonly attempt: number;
  readonly workerId: string;

  constructor(private readonly parts: HandlerContextParts) {
    this.runId = parts.invocation.run_id;
    this.callId = parts.invocation.call_id;
    this.identity = parts.invocation.identity;
    this.attempt = parts.attempt;
    this.workerId = parts.workerId;
  }

  get signal(): AbortSignal {
    return this.parts.scope.signal;
  }

  get logger(): Logger {
    return this.parts.logger();
  }

  get artifacts(): ArtifactStore {
    this.artifactStore ??= new TenantArtifacts(this.parts.blobs, {
      tenant: this.identity.tenant,
      runId: this.runId,
      callId: this.callId,
      tool: this.parts.invocation.tool,
    });
    return this.artifactStore;
  }

  emit(message: string, data?: unknown): void {
    this.parts.progress?.emit(message, data);
  }
}

/** Makes anything a handler threw into an AgentMeshError with a code the caller and the retry policy understand. */
export function toToolError(error: unknown, tool: string): AgentMeshError {
  if (error instanceof AgentMeshError) return error;
  const e = (typeof error === 'object' && error !== null ? error : {}) as {
    code?: unknown;
    retryable?: unknown;
    status?: unknown;
    statusCode?: unknown;
  };
  const message = error instanceof Error ? error.message : String(error);
  if (typeof e.code === 'string' && KNOWN_CODES.has(e.code))
    return new AgentMeshError(e.code, message, {
      ...(typeof e.retryable === 'boolean' ? { retryable: e.retryable } : {}),
      cause: error,
    });
  const failure = classifyFailure(error);
  const status =
    typeof e.status === 'number' ? e.status : typeof e.statusCode === 'number' ? e.statusCode : undefined;
  return new AgentMeshError(ErrorCode.ToolError, `tool "${tool}" failed: ${message}`, {
    retryable: failure === 'transient' || failure === '5xx',
    cause: error,
    ...(status === undefined ? {} : { details: { status } }),
  });
}
