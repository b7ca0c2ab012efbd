import { describe, expect, it, vi } from 'vitest';
import { ErrorCode } from './errors.js';

/** The checks' modules afresh: their compile counters start at zero whatever ran before in this worker. */
async function freshModules() {
  vi.resetModules();
  const [codec, jsonSchema, schemas, toolWire] = await Promise.all([
    import('./codec.js'),
    import('./json-schema-check.js'),
    import('./schemas.js'),
    import('./tool-wire.js'),
  ]);
  return { ...codec, ...jsonSchema, ...schemas, ...toolWire };
}

const valid = () => ({ call_id: 'c1', tool: 'math.calc', arguments: { lhs: 2 }, run_id: 'r1' });
const values = (): unknown[] => [
  valid(),
  { ...valid(), identity: { tenant: 't1', user: 'u' }, attempt: 2, timeout_ms: 500 },
  { ...valid(), tool: 'Not A Tool' },
  { ...valid(), attempt: 0 },
  { ...valid(), extra: true },
  { call_id: '' },
  null,
  'text',
];

/** What a value gives: the value, or the error's code and message. */
function answer(parse: (value: unknown) => unknown, value: unknown) {
  try {
    return { value: parse(value) };
  } catch (error) {
    return { error: `${(error as { code: string }).code}: ${(error as Error).message}` };
  }
}

describe('tool invocation checks', () => {
  it('parse invocations exactly as zod does before and after their checks compile, only past their thresholds', async () => {
    const {
      FAST_CHECK_COMPILE_AFTER,
      WORKER_INVOCATION_COMPILE_AFTER,
      ToolInvocationSchema,
      checkInvocationInput,
      jsonSchemaCompiles,
      parseToolInvocation,
      validate,
    } = await freshModules();
    const compiledBefore = jsonSchemaCompiles();
    const zod = (code: string) => (value: unknown) =>
      validate(ToolInvocationSchema, value, 'tool invocation', code);
    const parse = (value: unknown) =>
      parseToolInvocation(value, 'tool invocation', ErrorCode.InvalidMessage, true);
    let asked = 0; // both checks are asked about every object
    while (asked <= FAST_CHECK_COMPILE_AFTER + 8)
      for (const value of values()) {
        if (typeof value === 'object' && value !== null) asked++;
        expect(answer(parse, value)).toStrictEqual(answer(zod(ErrorCode.InvalidMessage), value));
        const input = answer((v) => checkInvocationInput(v as never), value);
        const expected = answer(zod(ErrorCode.InvalidRequest), value);
        if ('error' in expected) expect(input).toStrictEqual(expected);
        else expect(validate(ToolInvocationSchema, input.value, 'again')).toStrictEqual(expected.value);
        // a worker's check of the invocations it gets compiles sooner than a caller's check of what it sends
        const compiled =
          (asked <= WORKER_INVOCATION_COMPILE_AFTER ? 0 : 1) + (asked <= FAST_CHECK_COMPILE_AFTER ? 0 : 1);
        expect(jsonSchemaCompiles() - compiledBefore).toBe(compiled);
      }
    const owned = valid();
    expect(parseToolInvocation(owned, 'tool invocation')).toBe(owned); // compiled: checked in place
  });
});
