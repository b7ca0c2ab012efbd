import { describe, expect, it } from 'vitest';
import { compileChecks, ExpectSchema, type CaseOutcome } from './checks.js';

function outcome(extra: Partial<CaseOutcome> = {}): CaseOutcome {
  return {
    run_id: 'eval-1',
    status: 'done',
    text: 'The answer is 42.',
    turns: 2,
    tool_calls: 1,
    tools_called: ['math.calc'],
    usage: { input_tokens: 10, output_tokens: 5 },
    cost_usd: 0.002,
    duration_ms: 12,
    ...extra,
  };
}

function reasons(expectation: Record<string, unknown>, o: CaseOutcome, request = {}): string[] {
  return compileChecks(ExpectSchema.parse(expectation), request).run(o);
}

describe('eval checks', () => {
  it('status defaults to done and names what the run ended with', () => {
    expect(reasons({}, outcome())).toEqual([]);
    expect(
      reasons({}, outcome({ status: 'failed', error: { code: 'provider_error', message: 'boom' } })),
    ).toEqual(['status: expected done, got failed (provider_error: boom)']);
    expect(reasons({ status: 'budget_exhausted' }, outcome({ status: 'budget_exhausted' }))).toEqual([]);
    expect(reasons({ status: 'budget_exhausted' }, outcome())).toHaveLength(1);
  });

  it('contains needs every string in the final text', () => {
    expect(reasons({ contains: '42' }, outcome())).toEqual([]);
    expect(reasons({ contains: ['answer', '42'] }, outcome())).toEqual([]);
    const [reason] = reasons({ contains: ['answer', '43'] }, outcome());
    expect(reason).toMatch(/^contains: the final text lacks "43"/);
  });

  it('equals compares the whole final text, surrounding whitespace aside', () => {
    expect(reasons({ equals: 'The answer is 42.' }, outcome({ text: '  The answer is 42.\n' }))).toEqual([]);
    expect(reasons({ equals: 'The answer is 42' }, outcome())).toEqual([
      'equals: expected "The answer is 42", got "The answer is 42."',
    ]);
  });

  it('regex matches the final text, case-sensitively', () => {
    expect(reasons({ regex: '\\d+\\.$' }, outcome())).toEqual([]);
    expect(reasons({ regex: '^the answer' }, outcome())).toHaveLength(1);
    expect(reasons({ regex: '^\\d+$' }, outcome())[0]).toMatch(/^regex: \/\^\\d\+\$\/ does not match/);
  });

  it('refuses a regex the safe-regex check refuses, naming expect.regex', () => {
    expect(() => reasons({ regex: '^(a+)+$' }, outcome())).toThrow(
      /expect\.regex: regex "\^\(a\+\)\+\$" is not accepted/,
    );
    expect(() => reasons({ regex: '(' }, outcome())).toThrow(/expect\.regex: .*does not compile/);
  });

  it('stops a slow regex the safe-regex check lets through at its time limit', () => {
    const started = Date.now();
    expect(reasons({ regex: 'a*a*c' }, outcome({ text: 'a'.repeat(5000) }))).toEqual([
      'regex: /a*a*c/ took longer than 1000 ms on the final text',
    ]);
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(reasons({ regex: 'a*a*c' }, outcome({ text: 'aac' }))).toEqual([]);
  });

  it('json_schema validates the structured output, or the final text parsed as JSON', () => {
    const schema = { type: 'object', properties: { sum: { const: 9 } }, required: ['sum'] };
    expect(reasons({ json_schema: schema }, outcome({ text: '{"sum": 9}' }))).toEqual([]);
    expect(reasons({ json_schema: schema }, outcome({ text: '{"sum": 8}' }))[0]).toMatch(
      /^json_schema: the output does not match: \/sum must be equal to constant/,
    );
    expect(reasons({ json_schema: schema }, outcome({ text: 'nine' }))[0]).toMatch(
      /the final text is not JSON/,
    );
    expect(reasons({ json_schema: schema }, outcome({ text: 'ignored', output: { sum: 9 } }))).toEqual([]);
    const structured = { output_schema: { type: 'object' } };
    expect(reasons({ json_schema: schema }, outcome({ text: '{"sum": 9}' }), structured)).toEqual([
      'json_schema: the run has no structured output',
    ]);
  });

  it('refuses a json_schema the hardened output-schema checks refuse', () => {
    expect(() => reasons({ json_schema: { type: 'string', pattern: '^(a+)+$' } }, outcome())).toThrow(
      /expect\.json_schema: keyword "pattern"/,
    );
    expect(() => reasons({ json_schema: { $ref: 'https://example.com/s.json' } }, outcome())).toThrow(
      /expect\.json_schema/,
    );
  });

  it('tool_called takes names, namespaces and globs', () => {
    expect(reasons({ tool_called: 'math.calc' }, outcome())).toEqual([]);
    expect(reasons({ tool_called: 'math.*' }, outcome())).toEqual([]);
    expect(reasons({ tool_called: 'math' }, outcome())).toEqual([]);
    expect(reasons({ tool_called: ['math.calc', 'web.*'] }, outcome())[0]).toBe(
      'tool_called: no call of "web.*" (called: "math.calc")',
    );
    expect(reasons({ tool_called: 'math.calc' }, outcome({ tools_called: [] }))[0]).toMatch(/called: none/);
  });

  it('tool_not_called fails when any call matches', () => {
    expect(reasons({ tool_not_called: 'web.*' }, outcome())).toEqual([]);
    expect(reasons({ tool_not_called: ['web.*', 'math.*'] }, outcome())).toEqual([
      'tool_not_called: "math.calc" was called',
    ]);
    expect(reasons({ tool_not_called: '**' }, outcome({ tools_called: [] }))).toEqual([]);
  });

  it('max_tool_calls and max_turns are upper bounds', () => {
    expect(reasons({ max_tool_calls: 1, max_turns: 2 }, outcome())).toEqual([]);
    expect(reasons({ max_tool_calls: 0 }, outcome())).toEqual([
      'max_tool_calls: 1 tool calls, at most 0 expected',
    ]);
    expect(reasons({ max_turns: 1 }, outcome())).toEqual(['max_turns: 2 model turns, at most 1 expected']);
  });

  it('max_cost_usd fails above the bound and when the cost is unknown', () => {
    expect(reasons({ max_cost_usd: 0.01 }, outcome())).toEqual([]);
    expect(reasons({ max_cost_usd: 0.001 }, outcome())).toEqual([
      'max_cost_usd: the run cost 0.002 USD, at most 0.001 expected',
    ]);
    expect(reasons({ max_cost_usd: 1 }, outcome({ cost_usd: undefined }))[0]).toMatch(/cost is unknown/);
  });

  it('reports every failing check of a case', () => {
    const all = reasons({ contains: 'x', max_turns: 1, tool_not_called: 'math.*' }, outcome());
    expect(all.map((r) => r.split(':')[0])).toEqual(['contains', 'tool_not_called', 'max_turns']);
  });
});
