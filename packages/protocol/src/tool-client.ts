import type { Bus } from './bus/types.js';
import { encodeJson } from './codec.js';
import { requestJson } from './rpc.js';
import {
  ToolInvocationSchema,
  ToolOutcomeSchema,
  type ToolInvocationInput,
  type ToolOutcome,
  type ToolProgress,
} from './schemas.js';
import { subjects as buildSubjects } from './subjects.js';

export interface InvokeToolOptions {
  prefix?: string;
  /** Overall deadline for the call, all attempts included. */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Called with the worker's started/progress notices. */
  onProgress?: (progress: ToolProgress) => void;
  /** Whether the tool may be re-sent to another replica after a worker may have run it. */
  idempotent?: boolean;
}

/**
 * Calls one tool through whichever worker replica the queue group picks, and returns its outcome.
 * Tool failures come back as outcomes with `is_error`; transport failures (no worker, busy, timeout) throw.
 */
export async function invokeTool(
  bus: Bus,
  invocation: ToolInvocationInput,
  options: InvokeToolOptions = {},
): Promise<ToolOutcome> {
  const s = buildSubjects(options.prefix);
  const body = ToolInvocationSchema.parse(invocation);
  void encodeJson;
  return requestJson(bus, s.toolInvoke(body.tool), body, ToolOutcomeSchema, {
    timeoutMs: options.timeoutMs ?? 30_000,
    ...(options.signal ? { signal: options.signal } : {}),
  });
}
