import { describe, expect, it } from 'vitest';
import { ToolOutcomeSchema, type ToolOutcome } from './schemas.js';
import { HandOverMarks, OUTCOME_OBJECTS, handOverOutcome, takeHandedOverOutcome } from './tool-handover.js';

const outcome = (extra: Partial<ToolOutcome> = {}): ToolOutcome => ({
  call_id: 'c-1',
  tool: 'test.tool',
  worker_id: 'w-1',
  is_error: false,
  output: { items: [1, { deep: true }] },
  preview: '{"items":[1,{"deep":true}]}',
  elapsed_ms: 0.5,
  attempts: 1,
  ...extra,
});

describe('handOverOutcome', () => {
  it('copies every object an outcome holds and keeps the rest', () => {
    const error = { code: 'tool_error', message: 'x', retryable: false, details: { status: 502 } };
    const artifact = { ref: 'a-1', size: 10, mime: 'text/plain' };
    for (const source of [
      outcome(),
      outcome({ is_error: true, output: undefined, error }),
      outcome({ artifact }),
    ]) {
      const copy = handOverOutcome(source, 1 << 20)!;
      expect(copy).toEqual(source);
      for (const key of OUTCOME_OBJECTS)
        if (source[key] !== undefined) expect(copy[key]).not.toBe(source[key]);
    }
  });

  it('knows every member of an outcome: a new object member must be copied too', () => {
    const scalars = [
      'call_id',
      'tool',
      'worker_id',
      'is_error',
      'preview',
      'elapsed_ms',
      'attempts',
      'replayed',
      'dedup',
    ];
    expect(Object.keys(ToolOutcomeSchema.shape).sort()).toEqual([...scalars, ...OUTCOME_OBJECTS].sort());
  });

  it('gives up on output JSON would change, and on an outcome that may be too large', () => {
    expect(handOverOutcome(outcome({ output: { at: new Date(0) } }), 1 << 20)).toBeUndefined();
    expect(handOverOutcome(outcome({ preview: 'x'.repeat(1000) }), 4096)).toBeUndefined();
    expect(handOverOutcome(outcome({ output: 'x'.repeat(1000) }), 4096)).toBeUndefined();
    expect(handOverOutcome(outcome(), 4096)).toBeDefined();
  });

  it('lets a client take an outcome it made once, and nothing else', () => {
    const made = handOverOutcome(outcome(), 1 << 20)!;
    expect(takeHandedOverOutcome(outcome())).toBe(false);
    expect(takeHandedOverOutcome(made)).toBe(true);
    expect(takeHandedOverOutcome(made)).toBe(false);
    expect(takeHandedOverOutcome({ ...made })).toBe(false);
  });
});

describe('HandOverMarks', () => {
  it('lets each marked value be taken once, in any order, and nothing unmarked', () => {
    const marks = new HandOverMarks();
    const [a, b, c] = [{ n: 1 }, { n: 2 }, { n: 3 }];
    marks.mark(a);
    marks.mark(b);
    marks.mark(c);
    expect(marks.take({ n: 2 })).toBe(false);
    expect(marks.take(a)).toBe(true);
    expect(marks.take(c)).toBe(true);
    expect(marks.take(b)).toBe(true);
    for (const taken of [a, b, c, null, 'a']) expect(marks.take(taken)).toBe(false);
  });
});
