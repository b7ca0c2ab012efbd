import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { SpanKind, SpanStatusCode, context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import {
  CatalogRegisterReplySchema,
  CatalogSearchReplySchema,
  MemoryBus,
  SpanAttr,
  ToolSpecSchema,
  requestJson,
  silentLogger,
  subjects,
} from '@agentmesh/protocol';
import { Catalog } from './index.js';

const exporter = new InMemorySpanExporter();
const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
const s = subjects();
const TRACE_ID = '0af7651916cd43dd8448eb211c80319c';
const PARENT_SPAN = 'b7ad6b7169203331';

const spec = (name: string, description: string) =>
  ToolSpecSchema.parse({
    name,
    description,
    namespace: name.split('.')[0],
    input_schema: { type: 'object', properties: {} },
    safety: {},
    timeout_ms: 1000,
    retry: { max_attempts: 1, timeout_ms: 1000, retry_on: [], backoff_ms: 0, max_backoff_ms: 0, jitter: 0 },
    idempotent: true,
    loading: 'deferred',
  });

describe('catalog search span', () => {
  const bus = new MemoryBus();
  const catalog = new Catalog({ bus, logger: silentLogger() });

  beforeAll(async () => {
    trace.setGlobalTracerProvider(provider);
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    await catalog.start();
    await requestJson(
      bus,
      s.catalogRegister,
      {
        worker_id: 'w1',
        tools: [
          spec('crypto.sha256', 'Compute the SHA-256 hash of a text'),
          spec('fs.read_file', 'Read a file'),
        ],
      },
      CatalogRegisterReplySchema,
    );
  });
  afterAll(async () => {
    await catalog.stop();
    await bus.close();
    await provider.shutdown();
    trace.disable();
    propagation.disable();
    context.disable();
  });
  beforeEach(() => exporter.reset());

  it('is a server span, child of the traceparent in the request, with query, strategy and result count', async () => {
    const reply = await requestJson(
      bus,
      s.catalogSearch,
      { query: 'sha256 hash', strategy: 'bm25' },
      CatalogSearchReplySchema,
      { headers: { traceparent: `00-${TRACE_ID}-${PARENT_SPAN}-01` } },
    );
    expect(reply.results.map((r) => r.name)).toContain('crypto.sha256');
    const spans = exporter.getFinishedSpans().filter((x) => x.name === 'catalog.search');
    expect(spans).toHaveLength(1);
    const span = spans[0]!;
    expect(span.kind).toBe(SpanKind.SERVER);
    expect(span.spanContext().traceId).toBe(TRACE_ID);
    expect(span.parentSpanContext?.spanId).toBe(PARENT_SPAN);
    expect(span.attributes).toMatchObject({
      [SpanAttr.SearchQuery]: 'sha256 hash',
      [SpanAttr.SearchStrategy]: 'bm25',
      [SpanAttr.SearchResults]: reply.results.length,
    });
    expect(span.status.code).toBe(SpanStatusCode.UNSET);
  });

  it('starts a trace of its own without a traceparent, with the catalog default strategy', async () => {
    await requestJson(bus, s.catalogSearch, { query: 'zzzz nothing' }, CatalogSearchReplySchema);
    const [span] = exporter.getFinishedSpans().filter((x) => x.name === 'catalog.search');
    expect(span!.parentSpanContext).toBeUndefined();
    expect(span!.attributes).toMatchObject({
      [SpanAttr.SearchStrategy]: 'bm25',
      [SpanAttr.SearchResults]: 0,
    });
  });

  it('marks the span failed with the error code when the search fails', async () => {
    await expect(
      requestJson(bus, s.catalogSearch, { query: '   ', strategy: 'bm25' }, CatalogSearchReplySchema),
    ).rejects.toMatchObject({ code: 'invalid_request' });
    const [span] = exporter.getFinishedSpans().filter((x) => x.name === 'catalog.search');
    expect(span!.status.code).toBe(SpanStatusCode.ERROR);
    expect(span!.attributes['error.type']).toBe('invalid_request');
  });
});
