import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { AgentMeshError, MemoryBus, silentLogger } from '@agentmesh/protocol';
import { defineTool } from './define-tool.js';
import { backoffDelay, classifyFailure, resolvePolicy, DEFAULT_RETRY_POLICY } from './policy.js';
import { ToolWorker } from './worker.js';

const echo = () =>
  defineTool({
    name: 'test.echo',
    description: 'Echoes its text.',
    input: z.object({ text: z.string().describe('what to echo'), times: z.number().int().min(1).default(1) }),
    output: z.object({ text: z.string() }),
    handler: ({ text, times }) => ({ text: text.repeat(times) }),
  });

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (error) {
    return error instanceof AgentMeshError ? error.code : `not an AgentMeshError: ${String(error)}`;
  }
  return undefined;
}

describe('defineTool', () => {
  it('derives a draft 2020-12 spec from zod with defaults filled and no context fields', () => {
    const { spec } = echo();
    expect(spec.name).toBe('test.echo');
    expect(spec.namespace).toBe('test');
    expect(spec.input_schema['$schema']).toBe('https://json-schema.org/draft/2020-12/schema');
    expect(spec.input_schema['required']).toEqual(['text']);
    expect(Object.keys(spec.input_schema['properties'] as object)).toEqual(['text', 'times']);
    expect(JSON.stringify(spec)).not.toMatch(/signal|runId|identity|artifacts/);
    expect(spec.output_schema?.['type']).toBe('object');
    expect(spec.retry).toEqual({ ...DEFAULT_RETRY_POLICY, retry_on: ['transient', 'timeout', '5xx'] });
    expect(spec.timeout_ms).toBe(30_000);
    expect(spec).toMatchObject({ idempotent: false, loading: 'always', cpu_bound: false, version: '1' });
    expect(spec.safety).toMatchObject({ read_only: false, mutating: false });
  });

  it('fails loudly on invalid names, unrepresentable schemas, non-object inputs and missing handlers', () => {
    const base = { description: 'd', input: z.object({}), handler: () => 1 };
    expect(codeOf(() => defineTool({ ...base, name: 'Bad.Name' }))).toBe('invalid_tool_name');
    expect(codeOf(() => defineTool({ ...base, name: 'a__b' }))).toBe('invalid_tool_name');
    expect(codeOf(() => defineTool({ ...base, name: 'x.when', input: z.object({ at: z.date() }) }))).toBe(
      'invalid_config',
    );
    expect(codeOf(() => defineTool({ ...base, name: 'x.num', input: z.number() }))).toBe('invalid_config');
    expect(codeOf(() => defineTool({ name: 'x.none', description: 'd', input: z.object({}) }))).toBe(
      'invalid_config',
    );
    expect(codeOf(() => defineTool({ ...base, name: 'x.nodesc', description: ' ' }))).toBe('invalid_config');
    expect(
      codeOf(() => defineTool({ ...base, name: 'x.retry', retry: { retry_on: ['sometimes' as never] } })),
    ).toBe('invalid_config');
  });

  it('rejects two tools with the same name on one worker', () => {
    expect(
      () => new ToolWorker({ bus: new MemoryBus(), tools: [echo(), echo()], logger: silentLogger() }),
    ).toThrow(/test\.echo.*twice/);
  });

  it('validates arguments with the compiled schema, then zod, naming the field', async () => {
    const tool = echo();
    expect(tool.parseArguments({ text: 'a' })).toEqual({ text: 'a', times: 1 });
    expect(() => tool.parseArguments({ text: 3 })).toThrow(/text: must be string/);
    expect(() => tool.parseArguments({})).toThrow(/text: must have required property 'text'/);
    expect(() => tool.parseArguments({ text: 'a', times: 0 })).toThrow(/times/);
    await expect(tool.invoke({ text: 'ab', times: 2 })).resolves.toEqual({ text: 'abab' });
  });

  it('checks outputs against the output schema', async () => {
    const liar = defineTool({
      name: 'test.liar',
      description: 'Returns the wrong shape.',
      input: z.object({}),
      output: z.object({ ok: z.boolean() }),
      handler: () => ({ ok: 'yes' }) as never,
    });
    await expect(liar.invoke({})).rejects.toMatchObject({ code: 'invalid_output' });
  });

  it('runs a CPU tool module in process on invoke', async () => {
    const tool = defineTool({
      name: 'test.who',
      description: 'Echoes its thread context.',
      input: z.object({ n: z.number() }),
      cpu: {
        module: new URL('../../../test/fixtures/worker-cpu-task.mjs', import.meta.url),
        export: 'whoAmI',
      },
    });
    expect(tool.spec.cpu_bound).toBe(true);
    await expect(tool.invoke({ n: 1 }, { runId: 'r1', callId: 'c1' })).resolves.toMatchObject({
      args: { n: 1 },
      context: { runId: 'r1', callId: 'c1', identity: { tenant: 'default' } },
    });
  });
});

describe('retry policy', () => {
  it('falls through field by field to the defaults', () => {
    expect(resolvePolicy({ timeout_ms: 5000 })).toEqual({ ...DEFAULT_RETRY_POLICY, timeout_ms: 5000 });
    expect(resolvePolicy({ max_attempts: 1 }, 700)).toMatchObject({
      max_attempts: 1,
      timeout_ms: 700,
      backoff_ms: 100,
    });
    expect(resolvePolicy({ timeout_ms: 9 }, 700).timeout_ms).toBe(9);
  });

  it('doubles the backoff per attempt, caps it, and spreads it by the jitter', () => {
    const p = resolvePolicy({ backoff_ms: 100, max_backoff_ms: 1000, jitter: 0 });
    expect([1, 2, 3, 4, 5, 6].map((a) => backoffDelay(p, a))).toEqual([100, 200, 400, 800, 1000, 1000]);
    const j = resolvePolicy({ backoff_ms: 100, jitter: 0.5 });
    expect(backoffDelay(j, 1, () => 0)).toBe(50);
    expect(backoffDelay(j, 1, () => 1)).toBe(150);
  });

  it('classifies failures', () => {
    expect(classifyFailure(new AgentMeshError('timeout', 't'))).toBe('timeout');
    expect(classifyFailure(new AgentMeshError('unavailable', 'u'))).toBe('transient');
    expect(classifyFailure(new AgentMeshError('cancelled', 'c'))).toBe('cancelled');
    expect(classifyFailure(new AgentMeshError('tool_error', 'x'))).toBe('permanent');
    expect(classifyFailure(Object.assign(new Error('bad gateway'), { status: 502 }))).toBe('5xx');
    expect(classifyFailure(Object.assign(new Error('reset'), { code: 'ECONNRESET' }))).toBe('transient');
    expect(classifyFailure(new TypeError('x is undefined'))).toBe('permanent');
  });
});

describe('tool.invoke without a signal', () => {
  it('gives each call a signal of its own, so listeners of concurrent calls never pile up on one', async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(`${warning.name}: ${warning.message}`);
    process.on('warning', onWarning);
    try {
      const release: (() => void)[] = [];
      const waiter = defineTool({
        name: 'test.waiter',
        description: 'Waits until released, listening for an abort like a handler passing its signal on.',
        input: z.object({}),
        handler: (_args, ctx) =>
          new Promise<number>((resolve) => {
            ctx.signal.addEventListener('abort', () => resolve(-1));
            release.push(() => resolve(1));
          }),
      });
      const calls = Array.from({ length: 24 }, () => waiter.invoke({}));
      await new Promise<void>((resolve) => setImmediate(resolve));
      for (const r of release) r();
      expect(await Promise.all(calls)).toEqual(Array.from({ length: 24 }, () => 1));
      await new Promise<void>((resolve) => setImmediate(resolve));
      expect(warnings.filter((w) => w.includes('MaxListenersExceeded'))).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });
});
