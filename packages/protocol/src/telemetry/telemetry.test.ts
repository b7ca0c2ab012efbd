import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { SpanKind, SpanStatusCode, context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { AgentMeshError, ErrorCode } from '../errors.js';
import { MemoryBus } from '../bus/memory-bus.js';
import {
  SpanAttr,
  contextWithSpan,
  endModelCallSpan,
  endSpan,
  extractTraceContext,
  inSpan,
  injectTraceHeaders,
  startCatalogSearchSpan,
  startModelCallSpan,
  startRunSpan,
  startToolCallSpan,
} from './index.js';

const exporter = new InMemorySpanExporter();
const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
const contextManager = new AsyncLocalStorageContextManager();

beforeAll(() => {
  trace.setGlobalTracerProvider(provider);
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  context.setGlobalContextManager(contextManager.enable());
});
afterAll(async () => {
  await provider.shutdown();
  trace.disable();
  propagation.disable();
  context.disable();
});
beforeEach(() => exporter.reset());

const TRACEPARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

describe('trace context in bus headers', () => {
  it('injects traceparent and tracestate of the active span', () => {
    const span = startRunSpan({ runId: 'r1' });
    const headers = injectTraceHeaders({ 'am-tenant': 't' }, contextWithSpan(span));
    span.end();
    const ctx = span.spanContext();
    expect(headers).toEqual({
      'am-tenant': 't',
      traceparent: `00-${ctx.traceId}-${ctx.spanId}-01`,
    });
  });

  it('leaves headers alone when no span is active', () => {
    expect(injectTraceHeaders(undefined)).toBeUndefined();
    expect(injectTraceHeaders({ a: 'b' })).toEqual({ a: 'b' });
  });

  it('extracts a submitter context, any letter case, and a run span becomes its child', () => {
    const parent = extractTraceContext({ TraceParent: TRACEPARENT, tracestate: 'vendor=x' });
    const span = startRunSpan({ runId: 'r2', tenant: 't1', session: 's1', parent });
    span.end();
    const [done] = exporter.getFinishedSpans();
    expect(done!.spanContext().traceId).toBe('0af7651916cd43dd8448eb211c80319c');
    expect(done!.parentSpanContext?.spanId).toBe('b7ad6b7169203331');
    expect(done!.spanContext().traceState?.get('vendor')).toBe('x');
    expect(done!.attributes).toMatchObject({
      [SpanAttr.RunId]: 'r2',
      [SpanAttr.Tenant]: 't1',
      [SpanAttr.Session]: 's1',
    });
  });

  it('ignores a malformed traceparent (a new root instead of a crash)', () => {
    const span = startRunSpan({ runId: 'r3', parent: extractTraceContext({ traceparent: 'garbage' }) });
    span.end();
    expect(exporter.getFinishedSpans()[0]!.parentSpanContext).toBeUndefined();
  });

  it('travels across a bus request: the responder sees the requester as parent', async () => {
    const bus = new MemoryBus();
    bus.subscribe('tool.x', (msg) => {
      const server = startToolCallSpan({
        name: 'math.calc',
        callId: 'c1',
        side: 'server',
        workerId: 'w1',
        parent: extractTraceContext(msg.headers),
      });
      server.end();
      bus.respond(msg, 'ok');
    });
    const client = startToolCallSpan({ name: 'math.calc', callId: 'c1', side: 'client' });
    await inSpan(client, () =>
      bus.request('tool.x', '{}', { headers: injectTraceHeaders({}) ?? {}, timeoutMs: 1000 }),
    );
    await bus.close();
    const spans = exporter.getFinishedSpans();
    const server = spans.find((s) => s.kind === SpanKind.SERVER)!;
    const clientSpan = spans.find((s) => s.kind === SpanKind.CLIENT)!;
    expect(server.spanContext().traceId).toBe(clientSpan.spanContext().traceId);
    expect(server.parentSpanContext?.spanId).toBe(clientSpan.spanContext().spanId);
    expect(server.name).toBe('execute_tool math.calc');
    expect(server.attributes).toMatchObject({
      [SpanAttr.ToolName]: 'math.calc',
      [SpanAttr.ToolCallId]: 'c1',
      [SpanAttr.Operation]: 'execute_tool',
      [SpanAttr.WorkerId]: 'w1',
    });
  });
});

describe('span helpers', () => {
  it('model call spans follow the GenAI conventions', () => {
    const run = startRunSpan({ runId: 'r4' });
    const span = startModelCallSpan({ provider: 'openai', model: 'gpt-4o', parent: contextWithSpan(run) });
    endModelCallSpan(span, { inputTokens: 12, outputTokens: 5, finishReasons: ['tool_calls'] });
    run.end();
    const model = exporter.getFinishedSpans().find((s) => s.name === 'chat gpt-4o')!;
    expect(model.kind).toBe(SpanKind.CLIENT);
    expect(model.parentSpanContext?.spanId).toBe(run.spanContext().spanId);
    expect(model.attributes).toEqual({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': 'gpt-4o',
      'gen_ai.usage.input_tokens': 12,
      'gen_ai.usage.output_tokens': 5,
      'gen_ai.response.finish_reasons': ['tool_calls'],
    });
  });

  it('errors set status ERROR and record the error code', async () => {
    const span = startToolCallSpan({ name: 'crypto.sha256', callId: 'c9', side: 'client' });
    await expect(
      inSpan(span, () => Promise.reject(new AgentMeshError(ErrorCode.Timeout, 'took too long'))),
    ).rejects.toThrow('took too long');
    const [done] = exporter.getFinishedSpans();
    expect(done!.status).toEqual({ code: SpanStatusCode.ERROR, message: 'took too long' });
    expect(done!.attributes['error.type']).toBe(ErrorCode.Timeout);
    expect(done!.events[0]!.name).toBe('exception');
  });

  it('a plain Error is recorded with the internal code; endSpan without an error leaves status unset', () => {
    const failed = startCatalogSearchSpan({ query: 'hash', strategy: 'bm25' });
    endSpan(failed, new Error('boom'));
    const fine = startCatalogSearchSpan({ query: 'hash', strategy: 'bm25', side: 'client' });
    endSpan(fine);
    const [a, b] = exporter.getFinishedSpans();
    expect(a!.attributes['error.type']).toBe(ErrorCode.Internal);
    expect(a!.attributes[SpanAttr.SearchQuery]).toBe('hash');
    expect(b!.status.code).toBe(SpanStatusCode.UNSET);
    expect(b!.kind).toBe(SpanKind.CLIENT);
  });

  it('inSpan makes the span active for headers injected inside it', async () => {
    const run = startRunSpan({ runId: 'r5' });
    const headers = await inSpan(run, () => Promise.resolve(injectTraceHeaders(undefined)));
    expect(headers?.['traceparent']).toContain(run.spanContext().spanId);
  });
});
