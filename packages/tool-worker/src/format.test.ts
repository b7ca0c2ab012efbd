import { describe, expect, it } from 'vitest';
import type { ToolOutcome } from '@agentmesh/protocol';
import { outputText, successOutcomeJson } from './format.js';

describe('successOutcomeJson', () => {
  it('is JSON.stringify of a success outcome, with the preview standing in for the output', () => {
    const outputs: unknown[] = [
      { result: 5 },
      'plain',
      'quotes " and \\ and \n newlines, \u2028, \ud83d\ude00, a lone \ud800',
      '',
      0,
      -0,
      1e21,
      -1.5e-7,
      true,
      null,
      [1, 'two', [3], { four: 4 }],
      { nested: { deep: ['x', { y: null }] }, date: new Date(0), skipped: undefined, '': 1 },
    ];
    for (const output of outputs) {
      const text = outputText(output);
      const outcome: ToolOutcome = {
        call_id: 'c "1"\\',
        tool: 'math.calc',
        worker_id: 'host-1-abc',
        is_error: false,
        output,
        preview: text,
        elapsed_ms: 12.34,
        attempts: 2,
      };
      expect(successOutcomeJson(outcome, text)).toBe(JSON.stringify(outcome));
    }
  });

  it('escapes ids and names as JSON.stringify does, and writes numbers as it does', () => {
    const names = [
      'c-1',
      'run-1:c-2',
      'a/b.c@d+e_f',
      'with space',
      'q"uote',
      'back\\slash',
      'tab\t',
      '\u00e9t\u00e9',
      '\ud83d\ude00',
      '',
    ];
    const numbers = [0, -0, 12.34, 1e21, -1.5e-7, Number.NaN, Number.POSITIVE_INFINITY];
    for (const name of names)
      for (const n of numbers) {
        const outcome: ToolOutcome = {
          call_id: name,
          tool: `t.${name}`,
          worker_id: `w-${name}`,
          is_error: false,
          output: { result: 5 },
          preview: '{"result":5}',
          elapsed_ms: n,
          attempts: n,
        };
        expect(successOutcomeJson(outcome, outcome.preview)).toBe(JSON.stringify(outcome));
      }
  });
});
