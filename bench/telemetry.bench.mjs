// The cost of the telemetry hooks on the tool-call path: the worker's traceToolExecution and the tool client's
// withToolCallTraceHeaders, with no SDK (the default: must stay out of the hot path), with metrics installed, and
// with an OpenTelemetry SDK recording every span (exporter discarding). Each next to the bare call it wraps.
import { trace, propagation, context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import {
  NOOP_METRICS,
  createActorMetrics,
  setProcessMetrics,
  traceToolExecution,
  withToolCallTraceHeaders,
} from '@agentmesh/protocol';
import { figure } from './lib.mjs';

export const title = 'Telemetry: hook overhead per tool call (no SDK, metrics, SDK recording)';

const outcome = { call_id: 'c', tool: 'math.calc', is_error: false, output: { result: 5 } };
const call = { tool: 'math.calc', call_id: 'c', run_id: 'r' };
const execute = () => outcome;

/** ns per call of `fn`, best of 5 rounds of `n` calls. */
function nsPerCall(fn, n) {
  let best = Infinity;
  let sink = 0;
  for (let round = 0; round < 5; round++) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < n; i++) sink ^= fn() === undefined ? 0 : 1;
    best = Math.min(best, Number(process.hrtime.bigint() - start) / n);
  }
  if (sink === 2) console.log(sink);
  return best;
}

export async function run({ quick }) {
  const n = quick ? 200_000 : 1_000_000;
  const figures = [];
  const bare = nsPerCall(execute, n);
  const base = { name: 'bare execute() call', value: bare };
  figures.push(figure('bare execute() call', bare, 'ns'));
  figures.push(
    figure(
      'traceToolExecution, no SDK, no metrics',
      nsPerCall(() => traceToolExecution(undefined, call, 'w', execute), n),
      'ns',
      base,
    ),
  );
  const opts = { timeoutMs: 1000 };
  figures.push(
    figure(
      'withToolCallTraceHeaders, no SDK',
      nsPerCall(() => withToolCallTraceHeaders(opts, call), n),
      'ns',
    ),
  );

  setProcessMetrics(createActorMetrics('tool-worker'));
  figures.push(
    figure(
      'traceToolExecution, metrics installed',
      nsPerCall(() => traceToolExecution(undefined, call, 'w', execute), n / 4),
      'ns',
      base,
    ),
  );
  setProcessMetrics(NOOP_METRICS);

  const provider = new TracerProvider({
    spanProcessors: [
      new SimpleSpanProcessor({
        exporter: { export: (_s, done) => done({ code: 0 }), shutdown: async () => {} },
      }),
    ],
  });
  trace.setGlobalTracerProvider(provider);
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const headers = { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' };
  figures.push(
    figure(
      'traceToolExecution, SDK recording a span',
      nsPerCall(() => traceToolExecution(headers, call, 'w', execute), n / 10),
      'ns',
      base,
    ),
  );
  await provider.shutdown();
  trace.disable();
  propagation.disable();
  context.disable();
  return figures;
}
