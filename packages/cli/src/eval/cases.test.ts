import { describe, expect, it } from 'vitest';
import { parseDataset } from './cases.js';

const good = (id: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ id, task: 'say hi', script: [{ text: 'hi' }], expect: { contains: 'hi' }, ...extra });

describe('parseDataset', () => {
  it('loads each line as a case: the RunRequest without id and expect', () => {
    const { cases, errors } = parseDataset(
      `${good('a')}\n\n${good('b', { limits: { max_iterations: 3 } })}\n`,
    );
    expect(errors).toEqual([]);
    expect(cases.map((c) => [c.id, c.line])).toEqual([
      ['a', 1],
      ['b', 3],
    ]);
    expect(cases[1]!.request).toEqual({
      task: 'say hi',
      script: [{ text: 'hi' }],
      limits: { max_iterations: 3 },
    });
    expect(cases[0]!.expect.status).toBe('done');
  });

  it('reports each malformed line with its number and keeps the others', () => {
    const lines = [
      good('ok-1'),
      '{not json',
      '[1, 2]',
      JSON.stringify({ task: 'no id', expect: {} }),
      JSON.stringify({ id: 'no-expect', task: 'x' }),
      JSON.stringify({ id: 'bad-check', task: 'x', expect: { contians: 'x' } }),
      JSON.stringify({ id: 'bad-request', task: 'x', providr: 'openai', expect: {} }),
      JSON.stringify({ id: 'unsafe', task: 'x', expect: { regex: '(a|aa)*$' } }),
      good('ok-1'),
      JSON.stringify({ id: 'bad-status', task: 'x', expect: { status: 'fine' } }),
      good('ok-2'),
    ].join('\n');
    const { cases, errors } = parseDataset(lines);
    expect(cases.map((c) => c.id)).toEqual(['ok-1', 'ok-2']);
    expect(errors.map((e) => e.line)).toEqual([2, 3, 4, 5, 6, 7, 8, 9, 10]);
    const message = (line: number) => errors.find((e) => e.line === line)!.message;
    expect(message(2)).toMatch(/^not valid JSON/);
    expect(message(3)).toMatch(/must be a JSON object/);
    expect(message(4)).toMatch(/id/);
    expect(message(5)).toMatch(/expect/);
    expect(message(6)).toMatch(/contians/);
    expect(message(7)).toMatch(/providr/);
    expect(message(8)).toMatch(/expect\.regex: .*alternation/);
    expect(message(9)).toBe('id "ok-1" is already used on line 1');
    expect(message(10)).toMatch(/status/);
  });

  it('refuses a dataset past the line limit', () => {
    expect(() => parseDataset(`${good('x')}\n`.repeat(10_001))).toThrow(/limit is 10000/);
  });
});
