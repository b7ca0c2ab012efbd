import { describe, expect, it } from 'vitest';
import { compileJsonSchema } from './schema.js';

describe('compileJsonSchema', () => {
  it('compiles two tool schemas that carry the same $id, each checking its own shape', () => {
    const first = compileJsonSchema(
      {
        $id: 'https://example.test/args',
        type: 'object',
        properties: { a: { type: 'string' } },
        required: ['a'],
      },
      'the input schema of one.tool',
    );
    const second = compileJsonSchema(
      {
        $id: 'https://example.test/args',
        type: 'object',
        properties: { b: { type: 'number' } },
        required: ['b'],
      },
      'the input schema of other.tool',
    );
    expect(first({ a: 'x' })).toBe(true);
    expect(second({ b: 1 })).toBe(true);
    expect(second({ a: 'x' })).toBe(false);
  });
});
