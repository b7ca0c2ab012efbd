import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ErrorCode, FAST_CHECK_COMPILE_AFTER, MemoryBus, silentLogger } from '@agentmesh/protocol';
import { Planner } from '../planner.js';
import { ScriptedProvider, readScriptFile } from './scripted.js';

describe('scripted usage', () => {
  it('refuses a negative token count in a run request, naming the field (it would lower a parent total)', async () => {
    const bus = new MemoryBus();
    const planner = new Planner({ bus, logger: silentLogger() });
    try {
      const final = await planner.execute({
        task: 't',
        script: [{ text: 'done', usage: { input_tokens: 10, output_tokens: -1_000_000 } }],
      });
      expect(final).toMatchObject({ type: 'run.failed', error: { code: ErrorCode.InvalidRequest } });
      expect(final.type === 'run.failed' && final.error.message).toMatch(
        /script\.0\.usage\.output_tokens.*non-negative/,
      );
    } finally {
      await planner.drain();
      await bus.close();
    }
  });

  it('refuses one in a script file and in the provider itself', () => {
    const dir = mkdtempSync(join(tmpdir(), 'script-'));
    const file = join(dir, 'script.json');
    writeFileSync(file, JSON.stringify([{ text: 'x', usage: { input_tokens: -1, output_tokens: 0 } }]));
    expect(() => readScriptFile(file)).toThrow(/usage\.input_tokens/);
    expect(
      () => new ScriptedProvider([{ text: 'x', usage: { input_tokens: 1, output_tokens: -2 } }]),
    ).toThrow(/output_tokens/);
  });

  it('still takes zero and positive counts', () => {
    expect(
      () => new ScriptedProvider([{ text: 'x', usage: { input_tokens: 0, output_tokens: 7 } }]),
    ).not.toThrow();
  });
});

describe('scripted deltas', () => {
  const request = (onDelta: (d: { kind: string; text: string }) => void) => ({
    model: 'script',
    system: '',
    messages: [],
    tools: [],
    parallelCalls: false,
    signal: new AbortController().signal,
    turn: 0,
    onDelta,
  });

  it('streams the text in the given pieces, which make the text', async () => {
    const seen: string[] = [];
    const provider = new ScriptedProvider([{ deltas: ['SEC', 'RET_', '12'] }]);
    const turn = await provider.complete(request((d) => seen.push(`${d.kind}:${d.text}`)));
    expect(seen).toEqual(['text:SEC', 'text:RET_', 'text:12']);
    expect(turn.text).toBe('SECRET_12');
  });

  it('refuses deltas that do not make the text', () => {
    expect(() => new ScriptedProvider([{ text: 'abc', deltas: ['a', 'b'] }])).toThrow(
      /deltas must concatenate to text/,
    );
  });
});

describe('scripted turns checked once the check is compiled', () => {
  it('refuses what zod refuses, fills defaults as zod does, and takes a complete turn as it is', () => {
    for (let i = 0; i < FAST_CHECK_COMPILE_AFTER + 8; i++) new ScriptedProvider([{ text: 'warm' }]);
    const refused = (turn: object) => {
      try {
        new ScriptedProvider([{ text: 'first' }, turn as { text: string }]);
      } catch (error) {
        return error as { code?: string; message: string };
      }
      return undefined;
    };
    expect(refused({ text: 'x', usage: { input_tokens: 1, output_tokens: -2 } })).toMatchObject({
      code: ErrorCode.InvalidConfig,
      message: expect.stringMatching(/scripted turn 2.*output_tokens/),
    });
    expect(refused({ text: 'abc', deltas: ['a', 'b'] })?.message).toMatch(/deltas must concatenate to text/);
    expect(refused({ text: 'x', extra: true })?.code).toBe(ErrorCode.InvalidConfig);
    expect(refused({ tool_calls: [{ name: 'math.calc' }] })).toBeUndefined();
    const turn = { text: 'ok', tool_calls: [{ id: 'c1', name: 'math.calc', arguments: { a: 1 } }] };
    const provider = new ScriptedProvider([turn, { tool_calls: [{ name: 'math.calc' }] }]);
    const turns = (provider as unknown as { turns: unknown[] }).turns;
    expect(turns[0]).toBe(turn);
    expect(turns[1]).toEqual({ tool_calls: [{ name: 'math.calc', arguments: {} }] });
  });
});
