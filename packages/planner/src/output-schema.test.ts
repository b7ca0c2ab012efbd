import { describe, expect, it } from 'vitest';
import { allowsStrictMode, checkOutput, invalidOutputError, repairMessage } from './output-schema.js';

const schema = {
  type: 'object',
  properties: { hash: { type: 'string', minLength: 64, maxLength: 64 }, count: { type: 'integer' } },
  required: ['hash', 'count'],
  additionalProperties: false,
};

describe('checkOutput', () => {
  it('parses and validates, fenced JSON included', () => {
    const hash = 'a'.repeat(64);
    expect(checkOutput(JSON.stringify({ hash, count: 2 }), schema)).toEqual({
      ok: true,
      value: { hash, count: 2 },
    });
    expect(checkOutput('```json\n{"hash":"' + hash + '","count":1}\n```', schema)).toMatchObject({
      ok: true,
    });
  });

  it('names what is wrong, for the repair turn', () => {
    const result = checkOutput('{"hash":"zz","extra":1}', schema);
    expect(result.ok).toBe(false);
    const problems = (result as { problems: string[] }).problems.join('\n');
    expect(problems).toMatch(/count/);
    expect(problems).toMatch(/\/hash must NOT have fewer than 64 characters/);
    expect(problems).toMatch(/extra/);
    expect(checkOutput('not json', schema)).toMatchObject({
      ok: false,
      problems: [expect.stringMatching(/not JSON/)],
    });
    expect(repairMessage(['a', 'b'])).toContain('- a\n- b');
    expect(invalidOutputError(['x'])).toMatchObject({ code: 'invalid_output', retryable: false });
  });

  it('refuses a schema ajv cannot compile with invalid_request', () => {
    expect(() => checkOutput('{}', { type: 'nonsense' })).toThrow(/output_schema is not a valid JSON Schema/);
  });

  it('refuses a catastrophic-backtracking pattern at once instead of running it on the answer', () => {
    const started = performance.now();
    let refused: unknown;
    try {
      checkOutput(JSON.stringify('a'.repeat(40) + '!'), { type: 'string', pattern: '^(a+)+$' });
    } catch (error) {
      refused = error;
    }
    expect(performance.now() - started).toBeLessThan(100);
    expect(refused).toMatchObject({
      code: 'invalid_request',
      details: { field: 'output_schema', keyword: 'pattern', path: '#' },
    });
    expect((refused as Error).message).toMatch(/^output_schema: keyword "pattern" at # is refused/);
  });
});

describe('allowsStrictMode', () => {
  it('is true only when every object requires all its properties and forbids others', () => {
    expect(allowsStrictMode(schema)).toBe(true);
    expect(allowsStrictMode({ ...schema, required: ['hash'] })).toBe(false);
    expect(allowsStrictMode({ ...schema, additionalProperties: true })).toBe(false);
    const nested = {
      ...schema,
      properties: { ...schema.properties, inner: { type: 'object', properties: { a: { type: 'string' } } } },
      required: ['hash', 'count', 'inner'],
    };
    expect(allowsStrictMode(nested)).toBe(false);
  });
});
