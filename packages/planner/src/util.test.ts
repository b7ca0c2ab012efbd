import { describe, expect, it } from 'vitest';
import { stableStringify } from './util.js';

describe('stableStringify', () => {
  it('writes object keys in code-unit order at every depth, whatever order they were set in', () => {
    expect(stableStringify({ b: 1, a: { d: [2, { z: 1, y: 'x' }], c: null } })).toBe(
      '{"a":{"c":null,"d":[2,{"y":"x","z":1}]},"b":1}',
    );
    expect(stableStringify({ é: 1, Z: 2, a: 3, '10': 4, '9': 5 })).toBe('{"10":4,"9":5,"Z":2,"a":3,"é":1}');
  });

  it('leaves out undefined members, as JSON does, and writes the same text as JSON for sorted input', () => {
    expect(stableStringify({ a: undefined, b: 'q"uote', c: undefined })).toBe('{"b":"q\\"uote"}');
    expect(stableStringify({ a: undefined })).toBe('{}');
    const sorted = { a: [1, 'two', true, null], b: { c: 'ü\n' } };
    expect(stableStringify(sorted)).toBe(JSON.stringify(sorted));
  });
});
