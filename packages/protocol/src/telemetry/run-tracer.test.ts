import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { SpanKind, SpanStatusCode, context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import type { RunEvent } from '../schemas.js';
import {
  NOOP_METRICS,
  createActorMetrics,
  observeRunEvent,
  rememberRunTraceContext,
  resetRunTraces,
  runTraceId,
  setProcessMetrics,
  toolCallTraceHeaders,
  tracingActive,
} from './index.js';

const exporter = new InMemorySpanExporter();
const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });

beforeAll(() => {
  expect(tracingActive()).toBe(false);
  trace.setGlobalTracerProvider(provider);
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  expect(tracingActive()).toBe(true);
});
afterAll(async () => {
  await provider.shutdown();
  trace.disable();
  propagation.disable();
  context.disable();
  setProcessMetrics(NOOP_METRICS);
});
beforeEach(() => {
  exporter.reset();
  resetRunTraces();
});

const usage = { input_tokens: 100, output_tokens: 20 };

/** The events of a run with one turn of two tool calls (one fails) and a final answer. */
function runEvents(runId: string, from = 1): RunEvent[] {
  let seq = from - 1;
  const base = () => ({ run_id: runId, seq: ++seq, ts: new Date().toISOString() });
  const tool = { name: 'math.calc', worker_id: 'w1' };
  return [
    { type: 'run.accepted', ...base(), task: 't', provider: 'openai', model: 'gpt-4o' },
    { type: 'run.started', ...base(), planner_id: 'p1' },
    { type: 'llm.request', ...base(), iteration: 1, tools: ['math.calc'] },
    {
      type: 'llm.response',
      ...base(),
      iteration: 1,
      text: '',
      tool_calls: [
        { id: 'c1', name: 'math__calc', arguments: {} },
        { id: 'c2', name: 'math__calc', arguments: {} },
      ],
      usage,
    },
    { type: 'tool.started', ...base(), call_id: 'c1', ...tool },
    {
      type: 'tool.completed',
      ...base(),
      call_id: 'c1',
      ...tool,
      elapsed_ms: 3,
      is_error: false,
      preview: '5',
    },
    {
      type: 'tool.failed',
      ...base(),
      call_id: 'c2',
      ...tool,
      elapsed_ms: 4,
      is_error: true,
      error: { code: 'timeout', message: 'too slow' },
      preview: '',
    },
    { type: 'tool.search', ...base(), query: 'hash', strategy: 'bm25', results: ['crypto.sha256'] },
    { type: 'llm.request', ...base(), iteration: 2, tools: ['math.calc'] },
    { type: 'llm.response', ...base(), iteration: 2, text: 'done', tool_calls: [], usage },
    {
      type: 'run.completed',
      ...base(),
      status: 'done',
      text: 'done',
      iterations: 2,
      tool_calls: 2,
      usage: { input_tokens: 200, output_tokens: 40 },
    },
  ] as RunEvent[];
}

describe('observeRunEvent', () => {
  it('builds the run, model, tool client and catalog search spans from the events', () => {
    const events = runEvents('run-a');
    let headers: Record<string, string> | undefined;
    for (const e of events) {
      observeRunEvent(e);
      if (e.type === 'llm.response' && e.iteration === 1) headers = toolCallTraceHeaders('run-a', 'c1');
    }
    const spans = exporter.getFinishedSpans();
    const run = spans.find((s) => s.name === 'run')!;
    expect(run.spanContext().traceId).toBe(runTraceId('run-a'));
    expect(run.kind).toBe(SpanKind.SERVER);
    expect(run.attributes['agentmesh.run.status']).toBe('done');
    const models = spans.filter((s) => s.name === 'chat gpt-4o');
    expect(models).toHaveLength(2);
    expect(models[0]!.parentSpanContext?.spanId).toBe(run.spanContext().spanId);
    expect(models[0]!.attributes).toMatchObject({
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': 'gpt-4o',
      'gen_ai.usage.input_tokens': 100,
      'gen_ai.response.finish_reasons': ['tool_calls'],
    });
    expect(models[1]!.attributes['gen_ai.response.finish_reasons']).toEqual(['stop']);
    const tools = spans.filter((s) => s.name === 'execute_tool math.calc');
    expect(tools.map((t) => t.attributes['gen_ai.tool.call.id']).sort()).toEqual(['c1', 'c2']);
    const c1 = tools.find((t) => t.attributes['gen_ai.tool.call.id'] === 'c1')!;
    const c2 = tools.find((t) => t.attributes['gen_ai.tool.call.id'] === 'c2')!;
    expect(c1.parentSpanContext?.spanId).toBe(run.spanContext().spanId);
    expect(c1.status.code).toBe(SpanStatusCode.UNSET);
    expect(c2.status.code).toBe(SpanStatusCode.ERROR);
    expect(c2.attributes['error.type']).toBe('timeout');
    expect(headers?.['traceparent']).toBe(`00-${run.spanContext().traceId}-${c1.spanContext().spanId}-01`);
    const search = spans.find((s) => s.name === 'catalog.search')!;
    expect(search.attributes['agentmesh.catalog.search.results']).toBe(1);
    expect(toolCallTraceHeaders('run-a', 'c1')).toBeUndefined();
  });

  it("makes the run span a child of the submitter's traceparent", () => {
    rememberRunTraceContext('run-b', {
      traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
    });
    for (const e of runEvents('run-b')) observeRunEvent(e);
    const run = exporter.getFinishedSpans().find((s) => s.name === 'run')!;
    expect(run.spanContext().traceId).toBe('0af7651916cd43dd8448eb211c80319c');
    expect(run.parentSpanContext?.spanId).toBe('b7ad6b7169203331');
  });

  it('a run resumed by another planner continues the same trace', () => {
    const events = runEvents('run-c');
    for (const e of events.slice(0, 4)) observeRunEvent(e);
    resetRunTraces(); // the first planner dies with its in-memory state
    observeRunEvent({ ...(events[1] as RunEvent & { type: 'run.started' }), seq: 20, resumed: true });
    observeRunEvent({ ...events.at(-1)!, seq: 21 });
    const runs = exporter.getFinishedSpans().filter((s) => s.name === 'run');
    expect(runs).toHaveLength(1);
    expect(runs[0]!.spanContext().traceId).toBe(runTraceId('run-c'));
    expect(runs[0]!.attributes['agentmesh.run.resumed']).toBe(true);
  });

  it('a run that ends in another status than done, or fails, is marked an error', () => {
    const events = runEvents('run-d');
    for (const e of events.slice(0, 3)) observeRunEvent(e);
    observeRunEvent({
      type: 'run.failed',
      run_id: 'run-d',
      seq: 4,
      ts: new Date().toISOString(),
      error: { code: 'provider_error', message: 'model down' },
    });
    const spans = exporter.getFinishedSpans();
    const run = spans.find((s) => s.name === 'run')!;
    expect(run.status).toEqual({ code: SpanStatusCode.ERROR, message: 'model down' });
    expect(run.attributes['error.type']).toBe('provider_error');
    expect(spans.some((s) => s.name === 'chat gpt-4o')).toBe(true);
  });

  it("times a catalog search from the model's tool_search call and nests it under that call", () => {
    const ts = () => new Date().toISOString();
    const events = [
      { type: 'run.started', run_id: 'run-s', seq: 1, ts: ts(), planner_id: 'p1' },
      { type: 'llm.request', run_id: 'run-s', seq: 2, ts: ts(), iteration: 1, tools: ['tool_search'] },
      {
        type: 'llm.response',
        run_id: 'run-s',
        seq: 3,
        ts: ts(),
        iteration: 1,
        text: '',
        tool_calls: [{ id: 's1', name: 'tool_search', arguments: { query: 'hash' } }],
        usage,
      },
      {
        type: 'tool.search',
        run_id: 'run-s',
        seq: 4,
        ts: ts(),
        query: 'hash',
        strategy: 'bm25',
        results: [],
      },
    ] as RunEvent[];
    for (const e of events) observeRunEvent(e);
    const spans = exporter.getFinishedSpans();
    const call = spans.find((s) => s.name === 'execute_tool tool_search')!;
    const search = spans.find((s) => s.name === 'catalog.search')!;
    expect(search.parentSpanContext?.spanId).toBe(call.spanContext().spanId);
    const ms = (t: [number, number]) => t[0] * 1000 + t[1] / 1e6;
    expect(Math.abs(ms(search.startTime) - ms(call.startTime))).toBeLessThan(50);
    expect(ms(search.endTime)).toBeGreaterThanOrEqual(ms(search.startTime));
    expect(search.attributes['agentmesh.catalog.search.query']).toBe('hash');
  });

  it('records the planner metrics from the same events', async () => {
    const metrics = createActorMetrics('planner');
    setProcessMetrics(metrics);
    for (const e of runEvents('run-e')) observeRunEvent(e);
    setProcessMetrics(NOOP_METRICS);
    const text = await metrics.scrape();
    expect(text).toMatch(/agentmesh_runs_started_total\{actor="planner"\} 1/);
    expect(text).toMatch(/agentmesh_runs_finished_total\{status="done",actor="planner"\} 1/);
    expect(text).toMatch(
      /agentmesh_model_calls_total\{provider="openai",model="gpt-4o",outcome="ok",actor="planner"\} 2/,
    );
    expect(text).toMatch(/agentmesh_tool_calls_total\{tool="math.calc",outcome="ok",actor="planner"\} 1/);
    expect(text).toMatch(
      /agentmesh_tool_calls_total\{tool="math.calc",outcome="timeout",actor="planner"\} 1/,
    );
    expect(text).toMatch(/agentmesh_runs_in_flight\{actor="planner"\} 0/);
  });
});
