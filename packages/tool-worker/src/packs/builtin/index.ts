import { createHash } from 'node:crypto';
import { z } from 'zod';
import { AgentMeshError, ErrorCode } from '@agentmesh/protocol';
import { defineTool, type Tool } from '../../define-tool.js';

const pure = { read_only: true } as const;

/** `math.calc {lhs, rhs, op}`: one arithmetic operation. */
export function mathCalcTool() {
  return defineTool({
    name: 'math.calc',
    description:
      'Computes lhs op rhs for op add, sub, mul or div and returns the number. Use it for exact arithmetic.',
    input: z.object({
      lhs: z.number().describe('left operand'),
      rhs: z.number().describe('right operand'),
      op: z.enum(['add', 'sub', 'mul', 'div']).describe('the operation'),
    }),
    output: z.object({ result: z.number() }),
    safety: pure,
    idempotent: true,
    timeoutMs: 1000,
    tags: ['builtin', 'math'],
    handler: ({ lhs, rhs, op }) => {
      if (op === 'div' && rhs === 0)
        throw new AgentMeshError(
          ErrorCode.InvalidArguments,
          'division by zero: rhs must not be 0 when op is "div"',
          {
            retryable: false,
            details: { lhs, rhs, op },
          },
        );
      const result =
        op === 'add' ? lhs + rhs : op === 'sub' ? lhs - rhs : op === 'mul' ? lhs * rhs : lhs / rhs;
      if (!Number.isFinite(result))
        throw new AgentMeshError(
          ErrorCode.InvalidArguments,
          `${lhs} ${op} ${rhs} overflows a finite number`,
          {
            retryable: false,
          },
        );
      return { result };
    },
  });
}

const RegexMatchOutput = z.object({
  matched: z.boolean(),
  count: z.number().int().min(0),
  matches: z.array(
    z.object({
      match: z.string(),
      index: z.number().int().min(0),
      groups: z.array(z.string().nullable()),
      named: z.record(z.string(), z.string().nullable()).optional(),
    }),
  ),
  truncated: z.boolean(),
});

/**
 * `regex.match {pattern, text, flags?}`: every match of an untrusted pattern, run on a worker thread that is stopped
 * when the call times out, so catastrophic backtracking cannot hang the worker.
 */
export function regexMatchTool() {
  return defineTool({
    name: 'regex.match',
    description:
      'Finds every match of a JavaScript regular expression in a text; returns each match with its index and capture groups (at most 1000).',
    input: z.object({
      pattern: z.string().max(4096).describe('the regular expression source, without slashes'),
      text: z.string().max(1_000_000).describe('the text to search'),
      flags: z
        .string()
        .regex(/^[dgimsuvy]*$/, 'flags may only contain d, g, i, m, s, u, v, y')
        .max(8)
        .optional()
        .describe('regular expression flags such as "i" or "m"'),
    }),
    output: RegexMatchOutput,
    safety: pure,
    idempotent: true,
    timeoutMs: 2000,
    retry: { max_attempts: 1 },
    tags: ['builtin', 'text'],
    cpu: { module: new URL('../../../runtime/builtin-regex.mjs', import.meta.url), export: 'regexMatch' },
  });
}

/** `strings.count_char {text, char}`: how many times one character occurs. */
export function countCharTool() {
  return defineTool({
    name: 'strings.count_char',
    description: 'Counts how many times one character occurs in a text (case-sensitive, Unicode-aware).',
    input: z.object({
      text: z.string().describe('the text to scan'),
      char: z
        .string()
        .describe('exactly one character')
        .superRefine((c, ctx) => {
          const n = [...c].length;
          if (n !== 1)
            ctx.addIssue({
              code: 'custom',
              message: `char must be exactly one character, got ${JSON.stringify(c)} (${n} characters)`,
            });
        }),
    }),
    output: z.object({ count: z.number().int().min(0) }),
    safety: pure,
    idempotent: true,
    timeoutMs: 1000,
    tags: ['builtin', 'text'],
    handler: ({ text, char }) => {
      let count = 0;
      for (const c of text) if (c === char) count++;
      return { count };
    },
  });
}

/** `crypto.sha256 {text}`: the hex SHA-256 of a UTF-8 text. */
export function sha256Tool() {
  return defineTool({
    name: 'crypto.sha256',
    description: 'Returns the SHA-256 digest of a text (UTF-8), as 64 lowercase hex characters.',
    input: z.object({ text: z.string().describe('the text to hash') }),
    output: z.object({ hex: z.string().regex(/^[0-9a-f]{64}$/) }),
    safety: pure,
    idempotent: true,
    timeoutMs: 5000,
    tags: ['builtin', 'crypto'],
    handler: ({ text }) => ({ hex: createHash('sha256').update(text, 'utf8').digest('hex') }),
  });
}

/** The names of the `builtin` pack's tools, in its order: known without defining (and compiling) the tools. */
export const BUILTIN_TOOL_NAMES = [
  'math.calc',
  'regex.match',
  'strings.count_char',
  'crypto.sha256',
] as const;

/** The `builtin` pack: math.calc, regex.match, strings.count_char, crypto.sha256. */
export function builtinTools(): Tool<any, any>[] {
  return [mathCalcTool(), regexMatchTool(), countCharTool(), sha256Tool()];
}
