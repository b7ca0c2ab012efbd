import { describe, expect, it } from 'vitest';
import { AgentMeshError } from './errors.js';
import {
  OUTPUT_SCHEMA_MAX_BYTES,
  OUTPUT_SCHEMA_MAX_DEPTH,
  OutputSchemaSchema,
  outputSchemaRefusal,
  prepareOutputSchema,
} from './output-schema.js';
import {
  OUTPUT_SCHEMA_MAX_STEPS,
  OUTPUT_VALIDATOR_CACHE_SIZE,
  compileOutputSchema,
} from './output-validator.js';
import { RunRequestSchema } from './schemas/run.js';

function refusalOf(schema: Record<string, unknown>): AgentMeshError {
  try {
    compileOutputSchema(schema);
  } catch (error) {
    if (error instanceof AgentMeshError) return error;
    throw error;
  }
  throw new Error('the schema was accepted');
}

function nested(levels: number): Record<string, unknown> {
  let schema: Record<string, unknown> = { type: 'string' };
  for (let i = 1; i < levels; i++) schema = { type: 'array', items: schema };
  return schema;
}

describe('output_schema limits', () => {
  it('refuses pattern, patternProperties and format: regex, naming the keyword and where it is', () => {
    expect(refusalOf({ type: 'string', pattern: '^(a+)+$' })).toMatchObject({
      code: 'invalid_request',
      retryable: false,
      details: { field: 'output_schema', reason: 'refused_keyword', keyword: 'pattern', path: '#' },
    });
    const deep = refusalOf({
      type: 'object',
      properties: { tags: { type: 'object', patternProperties: { '^(a+)+$': { type: 'string' } } } },
    });
    expect(deep.details).toMatchObject({ keyword: 'patternProperties', path: '#/properties/tags' });
    expect(deep.message).toMatch(
      /^output_schema: keyword "patternProperties" at #\/properties\/tags is refused/,
    );
    const format = refusalOf({ type: 'array', items: { type: 'string', format: 'regex' } });
    expect(format.details).toMatchObject({ keyword: 'format', path: '#/items' });
    expect(format.message).toContain('"format": "regex" at #/items');
  });

  it('accepts those words where they are names or values, not keywords', () => {
    const schema = {
      type: 'object',
      properties: {
        pattern: { type: 'string', format: 'date' },
        format: { enum: ['regex', { pattern: 'x' }] },
      },
      required: ['pattern'],
    };
    expect(outputSchemaRefusal(schema)).toBeUndefined();
    expect(compileOutputSchema(schema)({ pattern: '(a+)+', format: 'regex' })).toBeUndefined();
    const proto = JSON.parse('{"type":"object","properties":{"__proto__":{"type":"string"}}}') as Record<
      string,
      unknown
    >;
    const properties = prepareOutputSchema(proto).schema['properties'] as object;
    expect(Object.keys(properties)).toEqual(['__proto__']);
    expect(Object.getPrototypeOf(properties)).toBe(Object.prototype);
  });

  it('refuses references outside the schema and $id or $schema below the root', () => {
    expect(refusalOf({ $ref: 'https://example.test/other.json' }).details).toMatchObject({
      reason: 'remote_ref',
      keyword: '$ref',
    });
    expect(refusalOf({ properties: { a: { $dynamicRef: 'other.json#node' } } }).details).toMatchObject({
      reason: 'remote_ref',
      path: '#/properties/a',
    });
    expect(
      refusalOf({ properties: { a: { $id: 'https://example.test/a', type: 'string' } } }).details,
    ).toMatchObject({ reason: 'nested_resource', keyword: '$id', path: '#/properties/a' });
    const local = {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      $id: 'https://example.test/tree',
      $defs: {
        node: { type: 'object', properties: { kids: { type: 'array', items: { $ref: '#/$defs/node' } } } },
      },
      $ref: '#/$defs/node',
    };
    expect(compileOutputSchema(local)({ kids: [{ kids: [] }] })).toBeUndefined();
    expect(compileOutputSchema(local)({ kids: [1] })).toHaveLength(1);
  });

  it('refuses a schema over OUTPUT_SCHEMA_MAX_BYTES or OUTPUT_SCHEMA_MAX_DEPTH, naming the limit', () => {
    const big = refusalOf({ type: 'string', description: 'x'.repeat(OUTPUT_SCHEMA_MAX_BYTES) });
    expect(big.details).toMatchObject({ reason: 'too_large', limit: OUTPUT_SCHEMA_MAX_BYTES });
    expect(big.message).toContain(`more than OUTPUT_SCHEMA_MAX_BYTES (${OUTPUT_SCHEMA_MAX_BYTES})`);
    expect(outputSchemaRefusal(nested(OUTPUT_SCHEMA_MAX_DEPTH))).toBeUndefined();
    const deep = refusalOf(nested(OUTPUT_SCHEMA_MAX_DEPTH + 1));
    expect(deep.details).toMatchObject({ reason: 'too_deep', limit: OUTPUT_SCHEMA_MAX_DEPTH });
    expect(deep.message).toContain(`OUTPUT_SCHEMA_MAX_DEPTH (${OUTPUT_SCHEMA_MAX_DEPTH} levels`);
  });

  it('is checked by the RunRequest schema, so a refused output_schema never reaches a planner', () => {
    const parsed = RunRequestSchema.safeParse({
      task: 'x',
      output_schema: { type: 'string', pattern: '^(a+)+$' },
    });
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues[0]).toMatchObject({
      path: ['output_schema'],
      message: /keyword "pattern" at #/,
    });
    expect(OutputSchemaSchema.safeParse({ type: 'object' }).success).toBe(true);
  });
});

describe('compileOutputSchema', () => {
  it('keeps two schemas with the same $id apart: each validates against its own', () => {
    const id = 'https://example.test/answer';
    const first = compileOutputSchema({
      $id: id,
      type: 'object',
      properties: { a: { type: 'string' } },
      required: ['a'],
    });
    expect(first({ a: 'x' })).toBeUndefined();
    const second = compileOutputSchema({
      $id: id,
      type: 'object',
      properties: { b: { type: 'number' } },
      required: ['b'],
    });
    expect(second({ b: 1 })).toBeUndefined();
    expect(second({ a: 'x' })).toMatchObject([{ keyword: 'required', params: { missingProperty: 'b' } }]);
  });

  it('keys compiled validators by the canonical text of the schema, keeping a bounded number', () => {
    const one = compileOutputSchema({
      type: 'object',
      required: ['a'],
      properties: { a: { type: 'string' } },
    });
    const same = compileOutputSchema({
      properties: { a: { type: 'string' } },
      required: ['a'],
      type: 'object',
    });
    expect(same).toBe(one);
    for (let i = 0; i < OUTPUT_VALIDATOR_CACHE_SIZE; i++)
      compileOutputSchema({ type: 'string', description: `n${i}` });
    expect(
      compileOutputSchema({ type: 'object', required: ['a'], properties: { a: { type: 'string' } } }),
    ).not.toBe(one);
    expect(prepareOutputSchema({ $id: 'https://example.test/x', type: 'string' }).schema).not.toHaveProperty(
      '$id',
    );
  });

  it('stops an answer whose validation would take too long with invalid_output', () => {
    const defs: Record<string, unknown> = { a40: { type: 'string' } };
    for (let i = 0; i < 40; i++)
      defs[`a${i}`] = { allOf: [{ $ref: `#/$defs/a${i + 1}` }, { $ref: `#/$defs/a${i + 1}` }] };
    const doubling = compileOutputSchema({ $defs: defs, $ref: '#/$defs/a0' });
    const started = performance.now();
    expect(() => doubling('x')).toThrow(`more than OUTPUT_SCHEMA_MAX_STEPS (${OUTPUT_SCHEMA_MAX_STEPS})`);
    expect(performance.now() - started).toBeLessThan(5_000);
    const unique = compileOutputSchema({ type: 'array', uniqueItems: true });
    const answer = Array.from({ length: 5_000 }, () => ({}));
    expect(() => unique(answer)).toThrow(expect.objectContaining({ code: 'invalid_output' }));
    expect(
      compileOutputSchema({ type: 'array', items: { type: 'string' }, uniqueItems: true })(['a', 'b']),
    ).toBeUndefined();
  });
});
