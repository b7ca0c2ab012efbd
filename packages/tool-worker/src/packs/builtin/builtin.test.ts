import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryBus, invokeTool, silentLogger, type ToolOutcome } from '@agentmesh/protocol';
import { ToolWorker } from '../../worker.js';
import { BUILTIN_TOOL_NAMES, builtinTools, countCharTool, mathCalcTool, sha256Tool } from './index.js';

const bus = new MemoryBus();
const worker = new ToolWorker({
  bus,
  tools: builtinTools(),
  logger: silentLogger(),
  register: false,
  concurrency: 512,
});
beforeAll(() => worker.start());
afterAll(() => worker.drain());

let seq = 0;
const run = (tool: string, args: unknown): Promise<ToolOutcome> =>
  invokeTool(bus, { call_id: `b-${++seq}`, run_id: `run-${seq % 7}`, tool, arguments: args });

describe('builtin pack', () => {
  it('has the contract names, output schemas and read-only idempotent specs', () => {
    const specs = builtinTools().map((t) => t.spec);
    expect(specs.map((s) => s.name)).toEqual([
      'math.calc',
      'regex.match',
      'strings.count_char',
      'crypto.sha256',
    ]);
    expect(specs.map((s) => s.name)).toEqual(BUILTIN_TOOL_NAMES);
    for (const spec of specs) {
      expect(spec.output_schema).toBeDefined();
      expect(spec).toMatchObject({ idempotent: true, safety: { read_only: true }, loading: 'always' });
    }
    expect(specs[0]?.input_schema['required']).toEqual(['lhs', 'rhs', 'op']);
    expect(specs[1]?.cpu_bound).toBe(true);
  });

  it('serves 100 concurrent calls per tool with distinct inputs and no cross-talk', async () => {
    const ops = ['add', 'sub', 'mul', 'div'] as const;
    const expected = (i: number) => {
      const op = ops[i % 4]!;
      const lhs = i * 3 + 1;
      const rhs = (i % 9) + 1;
      return {
        args: { lhs, rhs, op },
        result: op === 'add' ? lhs + rhs : op === 'sub' ? lhs - rhs : op === 'mul' ? lhs * rhs : lhs / rhs,
      };
    };
    const ids = Array.from({ length: 100 }, (_, i) => i);
    const [calc, regex, count, sha] = await Promise.all([
      Promise.all(ids.map((i) => run('math.calc', expected(i).args))),
      Promise.all(
        ids.map((i) => run('regex.match', { pattern: `n(${i})x`, text: `n${i}x n${i + 1}x n${i}x` })),
      ),
      Promise.all(
        ids.map((i) => run('strings.count_char', { text: 'z'.repeat(i) + 'q'.repeat(100 - i), char: 'z' })),
      ),
      Promise.all(ids.map((i) => run('crypto.sha256', { text: `payload ${i}` }))),
    ]);
    ids.forEach((i) => {
      expect(calc[i]).toMatchObject({ is_error: false, output: { result: expected(i).result } });
      expect(regex[i]).toMatchObject({
        is_error: false,
        output: {
          count: 2,
          matches: [{ match: `n${i}x`, groups: [String(i)] }, { index: `n${i}x n${i + 1}x `.length }],
        },
      });
      expect(count[i]).toMatchObject({ is_error: false, output: { count: i } });
      expect(sha[i]).toMatchObject({
        is_error: false,
        output: { hex: createHash('sha256').update(`payload ${i}`).digest('hex') },
      });
    });
  });

  it('gives clear domain errors', async () => {
    expect(await run('math.calc', { lhs: 1, rhs: 0, op: 'div' })).toMatchObject({
      is_error: true,
      error: { code: 'invalid_arguments', message: expect.stringMatching(/division by zero/) },
    });
    expect(await run('math.calc', { lhs: 1, rhs: 2, op: 'pow' })).toMatchObject({
      error: {
        code: 'invalid_arguments',
        message: expect.stringMatching(
          /op: must be equal to one of the allowed values \(add, sub, mul, div\)/,
        ),
      },
    });
    expect(await run('math.calc', { lhs: 1e308, rhs: 1e308, op: 'mul' })).toMatchObject({
      error: { code: 'invalid_arguments', message: expect.stringMatching(/overflows/) },
    });
    expect(await run('strings.count_char', { text: 'banana', char: 'an' })).toMatchObject({
      error: {
        code: 'invalid_arguments',
        message: expect.stringMatching(/char must be exactly one character, got "an"/),
      },
    });
    expect(await run('strings.count_char', { text: '😀a😀', char: '😀' })).toMatchObject({
      output: { count: 2 },
    });
    expect(await run('regex.match', { pattern: '(', text: 'x' })).toMatchObject({
      error: { code: 'invalid_arguments', message: expect.stringMatching(/invalid regular expression/) },
    });
    expect(await run('regex.match', { pattern: 'a', text: 'A', flags: 'i' })).toMatchObject({
      output: { count: 1 },
    });
    expect(await run('regex.match', { pattern: 'a', text: 'a', flags: 'x' })).toMatchObject({
      error: { code: 'invalid_arguments' },
    });
  });

  it('runs in process through tool.invoke', async () => {
    await expect(mathCalcTool().invoke({ lhs: 6, rhs: 7, op: 'mul' })).resolves.toEqual({ result: 42 });
    await expect(countCharTool().invoke({ text: 'aXa', char: 'a' })).resolves.toEqual({ count: 2 });
    await expect(sha256Tool().invoke({ text: '' })).resolves.toEqual({
      hex: 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
    });
  });
});
