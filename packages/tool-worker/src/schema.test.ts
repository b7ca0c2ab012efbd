import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { AgentMeshError } from '@agentmesh/protocol';
import { defineTool } from './define-tool.js';
import {
  IDENTITY_COMPILE_AFTER,
  compileJsonSchema,
  identityCheck,
  identityCheckCompiles,
  toolSchemaCompiles,
} from './schema.js';

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

describe('identityCheck', () => {
  const Args = z.object({ text: z.string().min(1), times: z.number().int().min(1).default(1) }).strict();

  it('answers "not checked" for its first values and compiles only past the threshold', () => {
    const check = identityCheck(Args, 3);
    if (check === undefined) throw new Error('the schema has an identity check');
    const compiledBefore = identityCheckCompiles();
    expect([1, 2, 3].map(() => check({ text: 'a', times: 1 }))).toEqual([false, false, false]);
    expect(identityCheckCompiles()).toBe(compiledBefore);
    expect(check({ text: 'a', times: 1 })).toBe(true);
    expect(check({ text: 'a' })).toBe(false); // zod would fill `times` in
    expect(check({ text: 'a', times: Number.NaN })).toBe(false);
    expect(identityCheckCompiles()).toBe(compiledBefore + 1);
  });

  it('is undefined for a schema JSON Schema does not render exactly, without compiling', () => {
    const compiledBefore = identityCheckCompiles();
    expect(identityCheck(z.object({ at: z.string().transform((s) => s.length) }))).toBeUndefined();
    expect(identityCheckCompiles()).toBe(compiledBefore);
  });
});

describe('a tool’s argument and output checks', () => {
  const answer = (fn: () => unknown) => {
    try {
      return { value: fn() };
    } catch (error) {
      return { error: `${(error as { code: string }).code}: ${(error as Error).message}` };
    }
  };

  it('give the same values and errors before and after their identity checks compile', () => {
    const tool = defineTool({
      name: 'test.same',
      description: 'Checks the same either way.',
      input: z.object({ text: z.string().min(1), times: z.number().int().min(1).default(1) }),
      output: z.object({ text: z.string(), n: z.number().int() }),
      handler: ({ text, times }) => ({ text: text.repeat(times), n: times }),
    });
    const args = [
      { text: 'a', times: 2 },
      { text: 'a' },
      { text: '' },
      { text: 3 },
      {},
      { text: 'a', times: 0 },
    ];
    const outputs = [
      { text: 'a', n: 1 },
      { text: 'a', n: 1.5 },
      { text: 1 },
      { text: 'a', n: 1, extra: true },
    ];
    const first = () => ({
      args: args.map((a) => answer(() => tool.parseArguments({ ...a }))),
      outputs: outputs.map((o) => answer(() => tool.checkOutput({ ...o }))),
    });
    const compiledBefore = identityCheckCompiles();
    const before = first();
    expect(identityCheckCompiles()).toBe(compiledBefore);
    for (let i = 0; i < IDENTITY_COMPILE_AFTER; i++) first();
    expect(identityCheckCompiles()).toBe(compiledBefore + 2);
    expect(first()).toStrictEqual(before);
    expect(before.args[1]).toStrictEqual({ value: { text: 'a', times: 1 } });
    expect(before.args[3]?.error).toMatch(/invalid_arguments: .*text: must be string/);
    expect(before.outputs[1]?.error).toMatch(/invalid_output: .*n:/);
  });
});

describe('a tool’s input schema', () => {
  it('is compiled at the tool’s first call, not where the tool is defined', () => {
    const compiledBefore = toolSchemaCompiles();
    const tool = defineTool({
      name: 'test.later',
      description: 'Compiles when called.',
      input: z.object({ text: z.string().regex(/^[a-z]+$/) }),
      handler: ({ text }) => text,
    });
    expect(toolSchemaCompiles()).toBe(compiledBefore);
    expect(() => tool.parseArguments({ text: 'A' })).toThrow(
      /invalid arguments for test\.later: text: must match pattern/,
    );
    expect(tool.parseArguments({ text: 'a' })).toEqual({ text: 'a' });
    expect(toolSchemaCompiles()).toBe(compiledBefore + 1);
  });

  it('with a regex ajv refuses still fails where the tool is defined, with ajv’s own message', () => {
    const define =
      (pattern: RegExp, record = false) =>
      () =>
        defineTool({
          name: 'test.badregex',
          description: 'Carries a regex the u flag refuses.',
          input: z.object({
            a: record
              ? z.record(z.string().regex(pattern), z.string())
              : z.array(z.string().regex(pattern)).optional(),
          }),
          handler: () => 1,
        });
    for (const [pattern, record, problem] of [
      [/[\w-x]/, false, '/[\\w-x]/u: Invalid character class'],
      [/a{/, false, '/a{/u: Incomplete quantifier'],
      [/\-/, true, '/\\-/u: Invalid escape'],
    ] as const) {
      const error = (() => {
        try {
          define(pattern, record)();
        } catch (caught) {
          return caught as AgentMeshError;
        }
        throw new Error(`${String(pattern)} was accepted`);
      })();
      expect(error.code).toBe('invalid_config');
      expect(error.message).toBe(
        `the input schema of tool "test.badregex" does not compile: Invalid regular expression: ${problem}`,
      );
    }
  });

  it('does not take data that holds a "pattern" key for a schema', () => {
    expect(() =>
      defineTool({
        name: 'test.data',
        description: 'A default that looks like a schema.',
        input: z.object({ filter: z.object({ pattern: z.string() }).default({ pattern: '(' }) }),
        handler: () => 1,
      }),
    ).not.toThrow();
  });
});
