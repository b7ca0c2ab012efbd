import type { Bus, BusMessage, Subscription } from './bus/types.js';
import {
  NOT_COPIED,
  fastValidator,
  inputCheck,
  jsonCopyWithin,
  outputCheck,
  parseJson,
  validate,
} from './codec.js';
import { AgentMeshError, ErrorCode } from './errors.js';
import { isToolName } from './names.js';
import { throwIfErrorReply } from './rpc.js';
import { withToolCallTraceHeaders } from './telemetry/run-tracer.js';
import {
  ToolInvocationSchema,
  ToolOutcomeSchema,
  type ToolInvocation,
  type ToolInvocationInput,
  type ToolOutcome,
  type ToolProgress,
} from './schemas.js';
import { SlotTable } from './slot-table.js';
import { takeHandedOverOutcome } from './tool-handover.js';
import { DEFAULT_PREFIX } from './subjects.js';
import { backoffDelay, retry } from './retry.js';

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
export async function invokeTool(
  bus: Bus,
  invocation: ToolInvocationInput,
  options: InvokeToolOptions = {},
): Promise<ToolOutcome> {
  const call = new ClientCall(bus, checkInvocationInput(invocation), options);
  let first: AgentMeshError;
  try {
    if (options.signal?.aborted !== true) return await call.sendUntilAnswered();
    first = new AgentMeshError(ErrorCode.Cancelled, 'aborted before the first send');
  } catch (error) {
    first = AgentMeshError.from(error);
  }
  return call.resend(first);
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
  private readonly idempotencyKey: string;
  private readonly deadline: number;
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

  constructor(
    bus: Bus,
    private readonly body: ToolInvocationInput,
    private readonly options: InvokeToolOptions,
  ) {
    this.idempotencyKey = body.idempotency_key ?? `${body.run_id}:${body.call_id}`;
    this.subject = toolSubject(options.prefix ?? DEFAULT_PREFIX, body.tool);
    this.timeoutMs = options.timeoutMs ?? 60_000;
    this.deadline = Date.now() + this.timeoutMs;
    this.lostAfterMs = Math.max(50, options.lostAfterMs ?? 3000);
    this.noRespondersMs = options.noRespondersMs ?? 2000;
    this.attempt = body.attempt ?? 1;
    this.router = progressRouter(bus);
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
      });
    } catch (error) {
      throw this.finalError(AgentMeshError.from(error));
    }
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

  private send(now: number): Send {
    this.sends++;
    return {
      subject: this.subject,
      invocation: this.body,
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
      this.lostNonIdempotent !== undefined &&
      refused?.code === ErrorCode.Unavailable &&
      refused.retryable &&
      result.outcome.dedup === 'shared'
    )
      throw new AgentMeshError(STORE_NOT_READY, refused.message, { retryable: true });
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

  /** No worker right now waits longer between sends than a busy one; a store that is not back longer still. */
  delayHint(error: AgentMeshError): number | undefined {
    if (error.code === ErrorCode.NoResponders)
      return backoffDelay(this.sends, { baseMs: 2, capMs: 250, jitter: 0.5 });
    if (error.code === STORE_NOT_READY)
      return backoffDelay(this.sends, { baseMs: 100, capMs: 1000, jitter: 0.5 });
    return undefined;
  }

  /** The error the caller gets once no more sends are made. */
  finalError(error: AgentMeshError): AgentMeshError {
    const body = this.body;
    if (this.options.signal?.aborted && error.code !== ErrorCode.Cancelled)
      return callError(body, ErrorCode.Cancelled, 'was cancelled', { cause: error });
    if (error.code === ErrorCode.Cancelled && !(error.details?.['call_id'] === body.call_id))
      return callError(body, ErrorCode.Cancelled, 'was cancelled', { cause: error });
    if (error.code === STORE_NOT_READY && this.lostNonIdempotent !== undefined)
      return workerLost(
        body,
        this.lostNonIdempotent,
        this.attempt,
        'and its outcome store could not tell in time',
      );
    if (error.code === ErrorCode.NoResponders) {
      if (this.deadline - Date.now() <= 0 && this.timeoutMs > this.noRespondersMs)
        return this.timedOut(error);
      if (this.lostNonIdempotent !== undefined)
        return workerLost(
          body,
          this.lostNonIdempotent,
          this.attempt,
          'and no replica was left to take it again',
        );
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

  private timedOut(cause?: unknown): AgentMeshError {
    return callError(this.body, ErrorCode.Timeout, `got no outcome within ${this.timeoutMs} ms`, {
      extra: { timeout_ms: this.timeoutMs },
      cause,
    });
  }
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

type SendResult =
  | { kind: 'outcome'; outcome: ToolOutcome; sawStarted: boolean }
  | { kind: 'lost'; workerId: string | undefined; why: string; dedup: boolean }
  | { kind: 'error'; error: AgentMeshError };

/** One send of a call: what goes on the wire and how long to wait for it. */
interface Send {
  subject: string;
  invocation: ToolInvocationInput;
  attempt: number;
  idempotencyKey: string;
  idempotent: boolean;
  remainingMs: number;
  lostAfterMs: number;
  /** Date.now() when the send starts. */
  now: number;
  signal: AbortSignal | undefined;
  onProgress: ((progress: ToolProgress) => void) | undefined;
}

/** A tool invocation as a client sends it. */
interface WireInvocation {
  call_id: string;
  run_id: string;
  tool: string;
  arguments: unknown;
  idempotency_key: string;
  progress_subject: string;
  identity?: ToolInvocationInput['identity'];
  attempt?: number;
  timeout_ms?: number;
  max_output_bytes?: number;
}

/** The invocation as sent: the defaults a worker fills in itself (default identity, first attempt) are left out. */
function wireInvocation(send: Send, progressSubject: string): WireInvocation {
  const invocation = send.invocation;
  const wire: WireInvocation = {
    call_id: invocation.call_id,
    run_id: invocation.run_id,
    tool: invocation.tool,
    arguments: invocation.arguments,
    idempotency_key: send.idempotencyKey,
    progress_subject: progressSubject,
  };
  const identity = invocation.identity;
  if (
    identity !== undefined &&
    (identity.tenant !== 'default' || identity.user !== undefined || identity.session !== undefined)
  )
    wire.identity = identity;
  if (send.attempt !== 1) wire.attempt = send.attempt;
  if (invocation.timeout_ms !== undefined) wire.timeout_ms = invocation.timeout_ms;
  if (invocation.max_output_bytes !== undefined) wire.max_output_bytes = invocation.max_output_bytes;
  return wire;
}

/** Room for the member names, quotes and numbers of a wire invocation, beyond its strings and objects. */
const WIRE_FRAME_BYTES = 512;

/**
 * The wire invocation made fit to hand over on an in-process bus: what the caller owns and may change later (its
 * arguments and identity) is copied with jsonCopy; the rest is strings and numbers made for this send. Undefined (send
 * the JSON text) when those cannot be copied or the whole may exceed `maxBytes` (strings count 6 bytes a character,
 * as jsonCopy counts them).
 */
function handOverWire(wire: WireInvocation, maxBytes: number): WireInvocation | undefined {
  const strings =
    wire.call_id.length +
    wire.run_id.length +
    wire.tool.length +
    wire.idempotency_key.length +
    wire.progress_subject.length;
  const budget = { left: maxBytes - WIRE_FRAME_BYTES - 6 * strings };
  const args = jsonCopyWithin(wire.arguments, budget);
  if (args === NOT_COPIED) return undefined;
  wire.arguments = args;
  if (wire.identity !== undefined) {
    const identity = jsonCopyWithin(wire.identity, budget);
    if (identity === NOT_COPIED) return undefined;
    wire.identity = identity as WireInvocation['identity'];
  }
  return wire;
}

function sendOnce(bus: Bus, router: ProgressRouter, send: Send): Promise<SendResult> {
  return new Promise<SendResult>((resolve, reject) => {
    const watch = router.watch(send, resolve);
    const signal = send.signal;
    let request: Promise<BusMessage>;
    try {
      const wire = wireInvocation(send, watch.subject);
      const options = withToolCallTraceHeaders(
        signal === undefined ? { timeoutMs: send.remainingMs } : { timeoutMs: send.remainingMs, signal },
        send.invocation,
      );
      // an in-process bus gets the invocation as a value, with no JSON text in between
      const handed = bus.requestValue === undefined ? undefined : handOverWire(wire, bus.maxPayload);
      request =
        handed !== undefined && bus.requestValue !== undefined
          ? bus.requestValue(send.subject, handed, options)
          : bus.request(send.subject, JSON.stringify(wire), options);
    } catch (error) {
      router.unwatch(watch);
      reject(error as Error);
      return;
    }
    request.then(
      (reply) => router.settle(watch, replyResult(reply, watch)),
      (error: unknown) => router.settle(watch, { kind: 'error', error: AgentMeshError.from(error) }),
    );
  });
}

function replyResult(reply: BusMessage, watch: CallWatch): SendResult {
  try {
    throwIfErrorReply(reply);
    const body = reply.value !== undefined ? reply.value : parseJson(reply.text(), 'tool outcome');
    const outcome = takeHandedOverOutcome(body) ? body : checkOutcome(body, `outcome of ${watch.tool}`);
    return { kind: 'outcome', outcome, sawStarted: watch.workerId !== undefined };
  } catch (error) {
    return { kind: 'error', error: AgentMeshError.from(error) };
  }
}

const checkOutcome = fastValidator(ToolOutcomeSchema);
const invocationCheck = outputCheck(ToolInvocationSchema);
const invocationInputCheck = inputCheck(ToolInvocationSchema);
const checkedToolNames = new Set<string>();

function isCheckedToolName(name: unknown): boolean {
  if (typeof name !== 'string') return false;
  if (checkedToolNames.has(name)) return true;
  if (!isToolName(name)) return false;
  if (checkedToolNames.size >= 4096) checkedToolNames.clear();
  checkedToolNames.add(name);
  return true;
}

/**
 * Parses a tool invocation exactly as `ToolInvocationSchema` does, without zod in the common case: a value that only
 * lacks the defaulted `identity` and `attempt` is completed and checked by a compiled validator; anything else goes
 * through zod, whose error names the offending field. With `copy` the result is a new object; without it (a value
 * the caller owns, like one just decoded) the defaults are filled in place.
 */
export function parseToolInvocation(
  value: unknown,
  what: string,
  code: string = ErrorCode.InvalidMessage,
  copy = false,
): ToolInvocation {
  if (typeof value === 'object' && value !== null && !Object.hasOwn(value, '__proto__')) {
    const candidate = (copy ? Object.assign({}, value) : value) as Partial<ToolInvocation>;
    if (candidate.identity === undefined) candidate.identity = { tenant: 'default' };
    if (candidate.attempt === undefined) candidate.attempt = 1;
    if (invocationCheck(candidate) && isCheckedToolName(candidate.tool)) return candidate as ToolInvocation;
  }
  return validate(ToolInvocationSchema, value, what, code);
}

/**
 * A caller's invocation, checked as `ToolInvocationSchema` parses it but not copied: a valid value is returned as it
 * is (its defaults still absent); anything else goes through zod, whose error names the offending field.
 */
function checkInvocationInput(value: ToolInvocationInput): ToolInvocationInput {
  if (
    typeof value === 'object' &&
    value !== null &&
    !Object.hasOwn(value, '__proto__') &&
    invocationInputCheck(value) &&
    isCheckedToolName(value.tool)
  )
    return value;
  return validate(ToolInvocationSchema, value, 'tool invocation', ErrorCode.InvalidRequest);
}

interface CallWatch {
  /** Where the worker sends this call's progress notices. */
  subject: string;
  handle: number;
  readonly callId: string;
  /** The subject the call was sent on, and whether its tool is not idempotent. */
  readonly toolSubject: string;
  readonly tool: string;
  readonly nonIdempotent: boolean;
  /** Set when the worker's `started` says the call runs under a claim in the shared outcome store. */
  dedup: boolean;
  readonly lostAfterMs: number;
  lastHeard: number;
  /** Set by the worker's `started` notice. */
  workerId: string | undefined;
  readonly onProgress: ((progress: ToolProgress) => void) | undefined;
  readonly resolve: (result: SendResult) => void;
}

const PROGRESS_KINDS: ReadonlySet<unknown> = new Set(['started', 'progress', 'heartbeat']);
const WATCH_TICK_MS = 100;

/**
 * One wildcard subscription per bus carries the progress notices of every call made through it, and one ticker
 * finds the calls whose worker went silent (it stops on a tick that finds no call).
 */
class ProgressRouter {
  private readonly prefix: string;
  private readonly entries = new SlotTable<CallWatch>();
  private readonly dedupBySubject = new Map<string, boolean>();
  private sub: Subscription | undefined;
  private ticker: NodeJS.Timeout | undefined;

  constructor(readonly bus: Bus) {
    this.prefix = bus.createInbox();
  }

  watch(send: Send, resolve: (result: SendResult) => void): CallWatch {
    this.sub ??= this.bus.subscribe(`${this.prefix}.*`, (msg) => this.onMessage(msg));
    const watch: CallWatch = {
      subject: '',
      handle: Number.NaN,
      callId: send.invocation.call_id,
      toolSubject: send.subject,
      tool: send.invocation.tool,
      nonIdempotent: !send.idempotent,
      dedup: false,
      lostAfterMs: send.lostAfterMs,
      lastHeard: send.now,
      workerId: undefined,
      onProgress: send.onProgress,
      resolve,
    };
    const handle = this.entries.add(watch);
    watch.handle = handle;
    watch.subject = `${this.prefix}.${SlotTable.token(handle)}`;
    if (this.ticker === undefined) {
      this.ticker = setInterval(() => this.tick(), WATCH_TICK_MS);
      this.ticker.unref();
    }
    return watch;
  }

  unwatch(watch: CallWatch): void {
    this.entries.delete(watch.handle);
  }

  /** Ends the watch and settles its call (the first settlement wins). */
  settle(watch: CallWatch, result: SendResult): void {
    this.entries.delete(watch.handle);
    if (result.kind === 'outcome' && watch.nonIdempotent)
      this.learn(watch.toolSubject, result.outcome.dedup === 'shared');
    watch.resolve(result);
  }

  /**
   * Whether the workers of a non-idempotent tool were last seen deduplicating through a shared outcome store. One
   * notice or outcome without it (an older or differently configured replica) turns it off for good on this bus.
   */
  sharedDedup(toolSubject: string): boolean {
    return this.dedupBySubject.get(toolSubject) === true;
  }

  private learn(toolSubject: string, shared: boolean): void {
    const known = this.dedupBySubject.get(toolSubject);
    if (known === shared || known === false) return;
    if (this.dedupBySubject.size >= 4096) this.dedupBySubject.clear();
    this.dedupBySubject.set(toolSubject, shared);
  }

  private onMessage(msg: BusMessage): void {
    const entry = this.entries.get(SlotTable.fromToken(msg.subject.slice(this.prefix.length + 1)));
    if (entry === undefined || entry.subject !== msg.subject) return;
    const p = safeJson(msg.data) as Partial<ToolProgress> | undefined;
    if (
      p === undefined ||
      p === null ||
      !PROGRESS_KINDS.has(p.kind) ||
      p.call_id !== entry.callId ||
      typeof p.worker_id !== 'string' ||
      typeof p.tool !== 'string'
    )
      return;
    entry.lastHeard = Date.now();
    if (p.kind === 'started') {
      entry.workerId = p.worker_id;
      entry.dedup = p.dedup === 'shared';
      if (entry.nonIdempotent) this.learn(entry.toolSubject, entry.dedup);
    }
    entry.onProgress?.(p as ToolProgress);
  }

  private tick(): void {
    if (this.entries.size === 0) {
      clearInterval(this.ticker);
      this.ticker = undefined;
      return;
    }
    const now = Date.now();
    this.entries.forEach((entry) => {
      const silent = now - entry.lastHeard;
      if (silent <= entry.lostAfterMs) return;
      this.settle(entry, {
        kind: 'lost',
        workerId: entry.workerId,
        dedup: entry.dedup,
        why:
          entry.workerId === undefined
            ? `no worker acknowledged it within ${entry.lostAfterMs} ms`
            : `no heartbeat for ${silent} ms`,
      });
    });
  }
}

const routers = new WeakMap<Bus, ProgressRouter>();

function progressRouter(bus: Bus): ProgressRouter {
  let router = routers.get(bus);
  if (router === undefined) routers.set(bus, (router = new ProgressRouter(bus)));
  return router;
}

function safeJson(data: Uint8Array): unknown {
  try {
    return parseJson(data);
  } catch {
    return undefined;
  }
}
