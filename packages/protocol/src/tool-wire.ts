import type { Bus, BusMessage } from './bus/types.js';
import {
  FAST_CHECK_COMPILE_AFTER,
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
import {
  ToolInvocationSchema,
  ToolOutcomeSchema,
  type ToolInvocation,
  type ToolInvocationInput,
} from './schemas.js';
import { withToolCallTraceHeaders } from './telemetry/run-tracer.js';
import { HandOverMarks, takeHandedOverOutcome } from './tool-handover.js';
import type { CallWatch, ProgressRouter, Send, SendResult } from './tool-progress-router.js';

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

/**
 * Wire invocations made by {@link handOverWire} from an invocation checked in the same turn, which no worker took yet:
 * valid by construction (the checked invocation's fields, copied, and the send's own), so the worker that takes one
 * only fills in its defaults (see {@link parseToolInvocation}).
 */
const handedOverInvocations = new HandOverMarks();

/** Room for the member names, quotes and numbers of a wire invocation, beyond its strings and objects. */
const WIRE_FRAME_BYTES = 512;

/**
 * The wire invocation made fit to hand over on an in-process bus: what the caller owns and may change later (its
 * arguments and identity) is copied with jsonCopy; the rest is strings and numbers made for this send. Undefined (send
 * the JSON text) when those cannot be copied or the whole may exceed `maxBytes` (strings count 6 bytes a character,
 * as jsonCopy counts them).
 */
function handOverWire(wire: WireInvocation, maxBytes: number, checked: boolean): WireInvocation | undefined {
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
  if (checked) handedOverInvocations.mark(wire);
  return wire;
}

export function sendOnce(bus: Bus, router: ProgressRouter, send: Send): Promise<SendResult> {
  return new Promise<SendResult>((resolve, reject) => {
    try {
      sendWatched(bus, router, send, resolve);
    } catch (error) {
      reject(error as Error);
    }
  });
}

/**
 * Sends once and gives `settled` the result, once: the outcome, an error, or a lost worker. Throws (watching nothing)
 * when the send cannot be made. {@link sendOnce} as a callback, for a caller that makes the one promise its own caller
 * gets.
 */
export function sendWatched(
  bus: Bus,
  router: ProgressRouter,
  send: Send,
  settled: (result: SendResult) => void,
): void {
  const watch = router.watch(send, settled);
  const signal = send.signal;
  let request: Promise<BusMessage> | undefined;
  try {
    const wire = wireInvocation(send, watch.subject);
    const options = withToolCallTraceHeaders(
      signal === undefined ? { timeoutMs: send.remainingMs } : { timeoutMs: send.remainingMs, signal },
      send.invocation,
    );
    // an in-process bus gets the invocation as a value, with no JSON text in between
    const handed =
      bus.requestValue === undefined ? undefined : handOverWire(wire, bus.maxPayload, send.checked);
    const subject = send.target ?? send.subject;
    if (handed !== undefined && bus.requestValue !== undefined)
      request = bus.requestValue(subject, handed, options);
    else if (bus.requestCallback === undefined) request = bus.request(subject, JSON.stringify(wire), options);
    // the reply is taken in the turn it arrives: no promise between the bus and the caller's
    else
      bus.requestCallback(subject, JSON.stringify(wire), options, (error, reply) =>
        router.settle(
          watch,
          reply === undefined
            ? { kind: 'error', error: AgentMeshError.from(error) }
            : replyResult(reply, watch),
        ),
      );
  } catch (error) {
    router.unwatch(watch);
    throw error;
  }
  request?.then(
    (reply) => router.settle(watch, replyResult(reply, watch)),
    (error: unknown) => router.settle(watch, { kind: 'error', error: AgentMeshError.from(error) }),
  );
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
/**
 * How many invocations a worker parses with zod before it compiles its check of them (callers and other messages wait
 * for {@link FAST_CHECK_COMPILE_AFTER}). A tool worker is a long-lived server, and on its event loop, cold between
 * calls that come a few dozen a second, zod takes 0.15-0.5 ms an invocation against about 0.05 ms for the compiled
 * check: the compile (about 10 ms) pays for itself within some 40 calls whenever it comes, so it comes early; a worker
 * that serves only a handful of calls (a test, a one-shot run) still never pays it.
 */
export const WORKER_INVOCATION_COMPILE_AFTER = 8;

/** Zod parses an invocation until these checks have been asked often enough to be worth compiling. */
const invocationCheck = outputCheck(ToolInvocationSchema, { after: WORKER_INVOCATION_COMPILE_AFTER });
const invocationInputCheck = inputCheck(ToolInvocationSchema, { after: FAST_CHECK_COMPILE_AFTER });
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
  if (handedOverInvocations.take(value))
    return withDefaults((copy ? Object.assign({}, value) : value) as Partial<ToolInvocation>);
  if (typeof value === 'object' && value !== null && !Object.hasOwn(value, '__proto__')) {
    const candidate = (copy ? Object.assign({}, value) : value) as Partial<ToolInvocation>;
    if (candidate.identity === undefined) candidate.identity = { tenant: 'default' };
    if (candidate.attempt === undefined) candidate.attempt = 1;
    if (invocationCheck(candidate) && isCheckedToolName(candidate.tool)) return candidate as ToolInvocation;
  }
  return validate(ToolInvocationSchema, value, what, code);
}

/** A wire invocation made in this process with its defaults filled in (it is the receiver's to change). */
function withDefaults(wire: Partial<ToolInvocation>): ToolInvocation {
  if (wire.identity === undefined) wire.identity = { tenant: 'default' };
  if (wire.attempt === undefined) wire.attempt = 1;
  return wire as ToolInvocation;
}

/**
 * A caller's invocation, checked as `ToolInvocationSchema` parses it but not copied: a valid value is returned as it
 * is (its defaults still absent); anything else goes through zod, whose error names the offending field.
 */
export function checkInvocationInput(value: ToolInvocationInput): ToolInvocationInput {
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
