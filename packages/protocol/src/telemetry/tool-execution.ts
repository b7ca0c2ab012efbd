import type { BusHeaders } from '../bus/types.js';
import { actorMetrics, NOOP_METRICS } from './metrics.js';
import { extractTraceContext } from './propagation.js';
import { endSpan, startToolCallSpan } from './spans.js';
import { tracingActive } from './tracing-state.js';

interface OutcomeLike {
  is_error: boolean;
  error?: { code: string; message: string } | undefined;
}

/**
 * Worker hook around one tool execution: a server `execute_tool <name>` span, child of the caller's trace context
 * in the request headers, plus the worker's tool-call metrics. With neither metrics nor a tracer provider it calls
 * `execute` and nothing else.
 */
export function traceToolExecution<T extends OutcomeLike>(
  headers: BusHeaders | undefined,
  call: { tool: string; call_id: string },
  workerId: string,
  execute: () => T | Promise<T>,
): T | Promise<T> {
  const metrics = actorMetrics();
  const tracing = tracingActive();
  if (metrics === NOOP_METRICS && !tracing) return execute();
  const started = performance.now();
  const span = tracing
    ? startToolCallSpan({
        name: call.tool,
        callId: call.call_id,
        side: 'server',
        workerId,
        parent: extractTraceContext(headers),
      })
    : undefined;
  metrics.toolCallsInFlight(1);
  const finish = (outcome: T | undefined, error?: unknown): void => {
    metrics.toolCallsInFlight(-1);
    const failure =
      error ??
      (outcome?.is_error ? (outcome.error ?? { code: 'tool_error', message: 'tool error' }) : undefined);
    const code = failure === undefined ? 'ok' : ((failure as { code?: string }).code ?? 'error');
    metrics.toolCall({
      tool: call.tool,
      outcome: code,
      durationSeconds: (performance.now() - started) / 1000,
    });
    if (span) endSpan(span, failure);
  };
  try {
    const result = execute();
    if (!(result instanceof Promise)) {
      finish(result);
      return result;
    }
    return result.then(
      (outcome) => {
        finish(outcome);
        return outcome;
      },
      (error: unknown) => {
        finish(undefined, error);
        throw error;
      },
    );
  } catch (error) {
    finish(undefined, error);
    throw error;
  }
}
