import { describe, expect, it, inject, afterAll } from 'vitest';
import { z } from 'zod';
import { AgentMeshError, ErrorCode, toErrorPayload } from './errors.js';
import { MemoryBus } from './bus/memory-bus.js';
import { NatsBus } from './bus/nats-bus.js';
import type { Bus } from './bus/types.js';
import { requestJson, respondError, serve } from './rpc.js';

describe('AgentMeshError', () => {
  it('keeps code, retryable, details and a cause chain through its payload', () => {
    const root = new AgentMeshError(ErrorCode.Timeout, 'worker took too long', { details: { ms: 30 } });
    const error = new AgentMeshError(ErrorCode.ToolError, 'tool failed', {
      retryable: false,
      details: { tool: 'math.calc' },
      cause: root,
    });
    const revived = AgentMeshError.fromPayload(JSON.parse(JSON.stringify(error.toPayload())));
    expect(revived).toBeInstanceOf(AgentMeshError);
    expect(revived).toMatchObject({ code: 'tool_error', message: 'tool failed', retryable: false });
    expect(revived.details).toEqual({ tool: 'math.calc' });
    expect(revived.cause).toBeInstanceOf(AgentMeshError);
    expect(revived.cause).toMatchObject({ code: 'timeout', retryable: true, details: { ms: 30 } });
  });

  it('wraps foreign errors and aborts', () => {
    expect(toErrorPayload(new TypeError('bad'))).toMatchObject({
      code: 'internal',
      message: 'bad',
      retryable: false,
    });
    const abort = new DOMException('stop', 'AbortError');
    expect(AgentMeshError.from(abort).code).toBe('cancelled');
  });
});

const buses: Bus[] = [];
afterAll(async () => {
  for (const b of buses) await b.close();
});

describe.each([
  ['MemoryBus', async () => new MemoryBus({ maxPayload: 64 * 1024 })],
  ['NatsBus', async () => NatsBus.connect(inject('natsUrl'))],
])('errors and bad input across the bus (%s)', (_name, makeBus) => {
  const Body = z.object({ n: z.number().int(), label: z.string() }).strict();
  const setup = async () => {
    const bus = await makeBus();
    buses.push(bus);
    const subject = `errors.${process.pid}.${Math.random().toString(36).slice(2)}`;
    serve({
      bus,
      subject,
      schema: Body,
      what: 'test request',
      maxBytes: 1024,
      handler: (body) => {
        if (body.n < 0)
          throw new AgentMeshError(ErrorCode.InvalidArguments, 'n must not be negative', {
            details: { n: body.n },
            cause: new AgentMeshError(ErrorCode.Conflict, 'inner'),
          });
        return { doubled: body.n * 2 };
      },
    });
    await bus.flush();
    return { bus, subject };
  };

  it('comes back as the same class with the same fields', async () => {
    const { bus, subject } = await setup();
    const error = await requestJson(bus, subject, { n: -1, label: 'x' }, z.unknown()).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(AgentMeshError);
    expect(error).toMatchObject({
      code: 'invalid_arguments',
      message: 'n must not be negative',
      retryable: false,
    });
    expect((error as AgentMeshError).details).toEqual({ n: -1 });
    expect((error as AgentMeshError).cause).toMatchObject({ code: 'conflict', message: 'inner' });
    expect(await requestJson(bus, subject, { n: 4, label: 'x' }, z.object({ doubled: z.number() }))).toEqual({
      doubled: 8,
    });
  });

  it.each([
    ['malformed JSON', '{"n": 1,', /not valid JSON/],
    ['a wrong type', JSON.stringify({ n: 'one', label: 'x' }), /invalid test request: n: /],
    ['a missing field', JSON.stringify({ n: 1 }), /label/],
    ['an unknown field', JSON.stringify({ n: 1, label: 'x', extra: true }), /extra/],
    [
      'an oversized payload',
      JSON.stringify({ n: 1, label: 'x'.repeat(5000) }),
      /exceeds the limit of 1024 bytes/,
    ],
  ])('answers %s with a clear error naming the problem, and keeps serving', async (_what, raw, pattern) => {
    const { bus, subject } = await setup();
    const reply = await bus.request(subject, raw);
    expect(reply.headers?.['am-status']).toBe('error');
    const body = JSON.parse(reply.text()) as { error: { code: string; message: string } };
    expect(body.error.message).toMatch(pattern);
    expect(await requestJson(bus, subject, { n: 1, label: 'ok' }, z.object({ doubled: z.number() }))).toEqual(
      {
        doubled: 2,
      },
    );
  });
});

describe('respondError', () => {
  it('sends an AgentMeshError passed as it is with its message, code, retryable and details', async () => {
    const bus = new MemoryBus();
    bus.subscribe('errors.direct', (msg) =>
      respondError(
        bus,
        msg,
        new AgentMeshError(ErrorCode.InvalidRequest, 'invalid run request: task: expected string', {
          retryable: false,
          details: { field: 'task' },
        }),
      ),
    );
    const error = await requestJson(bus, 'errors.direct', {}, z.unknown()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AgentMeshError);
    expect(error).toMatchObject({
      code: ErrorCode.InvalidRequest,
      message: 'invalid run request: task: expected string',
      retryable: false,
      details: { field: 'task' },
    });
    await bus.close();
  });
});
