import { describe, expect, it } from 'vitest';
import { GuardrailsSchema } from '@agentmesh/protocol';
import { GUARDRAIL_HOLD_MAX_CHARS, compileGuardrails, type TextRule } from './guardrail-rules.js';
import { StreamRedactor } from './stream-redactor.js';

function outputRules(rules: unknown[]): TextRule[] {
  return compileGuardrails(GuardrailsSchema.parse({ output: rules })).output;
}

const secretRule = outputRules([{ name: 'no-secrets', pattern: 'SECRET_[0-9]+', action: 'redact' }]);

/** Streams the pieces; returns what was published, in order, and the final step. */
function stream(rules: TextRule[], pieces: readonly string[]) {
  const redactor = new StreamRedactor(rules);
  const published: string[] = [];
  for (const piece of pieces) published.push(redactor.push(piece).text);
  const last = redactor.end();
  published.push(last.text);
  return { published, joined: published.join(''), redactor, blocked: redactor.blocked };
}

/** Every way to cut a text into `parts` non-empty pieces. */
function* splits(text: string, parts: number): Generator<string[]> {
  if (parts === 1) {
    yield [text];
    return;
  }
  for (let i = 1; i <= text.length - parts + 1; i++)
    for (const rest of splits(text.slice(i), parts - 1)) yield [text.slice(0, i), ...rest];
}

describe('StreamRedactor', () => {
  it('redacts a secret streamed as SEC, RET_, 12 and never publishes a piece of it', () => {
    const { published, joined } = stream(secretRule, ['the key is SEC', 'RET_', '12', ' ok']);
    expect(joined).toBe('the key is [redacted:no-secrets] ok');
    for (const piece of published) expect(piece).not.toMatch(/SEC|RET|12/);
  });

  it('property: a secret split at every position across 2 and 3 deltas never reaches the stream', () => {
    const text = 'before SECRET_4242 middle SECRET_7 after';
    let cases = 0;
    for (const parts of [2, 3])
      for (const pieces of splits(text, parts)) {
        const { published, joined } = stream(secretRule, pieces);
        expect(joined).toBe('before [redacted:no-secrets] middle [redacted:no-secrets] after');
        const prefix = published.reduce<string[]>((acc, p) => [...acc, (acc.at(-1) ?? '') + p], []);
        for (const p of prefix) expect(p).not.toMatch(/SECRET_\d|\d{2}/);
        cases++;
      }
    expect(cases).toBe(text.length - 1 + ((text.length - 1) * (text.length - 2)) / 2);
  });

  it('publishes text as soon as no match can start in it (bounded rules hold back only their longest match)', () => {
    const rules = outputRules([{ name: 'pin', pattern: 'PIN-\\d{4}', action: 'redact' }]);
    expect(rules[0]!.hold).toBe(8);
    const redactor = new StreamRedactor(rules);
    expect(redactor.push('hello world, this is long').text).toBe('hello world, this');
    expect(redactor.push(' PIN-12').text).toBe(' is lon');
    expect(redactor.push('34 done').text).toBe('g ');
    expect(redactor.end().text).toBe('[redacted:pin] done');
  });

  it('caps the hold-back of an unbounded rule, and still holds a match that keeps growing', () => {
    expect(secretRule[0]!.hold).toBe(GUARDRAIL_HOLD_MAX_CHARS);
    const long = `SECRET_${'9'.repeat(600)}`;
    const pieces = long.match(/.{1,50}/g)!;
    const { published, joined } = stream(secretRule, ['x '.repeat(200), ...pieces, ' end']);
    expect(joined).toBe(`${'x '.repeat(200)}[redacted:no-secrets] end`);
    expect(published.join('')).not.toContain('999');
  });

  it('a block match stops the stream: nothing of it or after it comes out', () => {
    const rules = outputRules([
      { name: 'no-secrets', pattern: 'SECRET_[0-9]+', action: 'redact' },
      { name: 'no-bomb', pattern: 'how to build a bomb', flags: 'i', action: 'block' },
    ]);
    const { joined, blocked } = stream(rules, ['Here is ', 'How to bu', 'ild a BOMB: step 1', ' SECRET_1']);
    expect(blocked?.name).toBe('no-bomb');
    expect(joined).not.toMatch(/bomb|build|SECRET/i);
  });

  it('a block rule overlapping a redaction wins', () => {
    const rules = outputRules([
      { name: 'r', pattern: 'abc', action: 'redact' },
      { name: 'b', pattern: 'bcd', action: 'block' },
    ]);
    expect(StreamRedactor.redact(rules, 'xabcdx').redactor.blocked?.name).toBe('b');
  });

  it('redacts a whole text at once and counts redactions per rule', () => {
    const { text, redactor } = StreamRedactor.redact(secretRule, 'a SECRET_1 b SECRET_22');
    expect(text).toBe('a [redacted:no-secrets] b [redacted:no-secrets]');
    expect(redactor.counts.get('no-secrets')?.count).toBe(2);
  });
});
