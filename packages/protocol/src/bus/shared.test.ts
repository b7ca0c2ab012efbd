import { describe, expect, it } from 'vitest';
import { isValidSubject, subjectMatches } from './shared.js';

/** The rule as NATS states it, on split tokens: `*` is one token, `>` one or more trailing tokens. */
function byTokens(pattern: string, subject: string): boolean {
  const p = pattern.split('.');
  const s = subject.split('.');
  for (let i = 0; i < p.length; i++) {
    if (p[i] === '>') return s.length > i;
    if (i >= s.length) return false;
    if (p[i] !== '*' && p[i] !== s[i]) return false;
  }
  return p.length === s.length;
}

/** Valid subjects as NATS states it, on split tokens: no empty token, wildcards only as whole tokens, `>` last. */
function validByTokens(subject: string, allowWildcards: boolean): boolean {
  if (subject.length === 0 || /[\s\x00-\x1f\x7f]/.test(subject)) return false;
  const tokens = subject.split('.');
  return tokens.every(
    (t, i) =>
      t.length > 0 && (allowWildcards || (t !== '*' && t !== '>')) && (t !== '>' || i === tokens.length - 1),
  );
}

/** A repeatable pseudo-random `n => 0..n-1`, so a failing case can be run again. */
function seeded(seed: number): (n: number) => number {
  return (n) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % n;
  };
}

describe('isValidSubject', () => {
  it('agrees with the token-by-token rule on 20,000 random subjects, with and without wildcards', () => {
    const parts = ['a', 'bc', '*', '>', '', 'a*', '>b', ' ', 'x\ty'];
    const rand = seeded(11);
    for (let i = 0; i < 20_000; i++) {
      const subject = Array.from({ length: 1 + rand(4) }, () => parts[rand(parts.length)]!).join('.');
      for (const wild of [true, false])
        expect(isValidSubject(subject, wild), `${JSON.stringify(subject)} ${wild}`).toBe(
          validByTokens(subject, wild),
        );
    }
    expect(isValidSubject('agentmesh.runs.r-1.events', false)).toBe(true);
    expect(isValidSubject('agentmesh.runs.>', false)).toBe(false);
    expect(isValidSubject('agentmesh.runs.>', true)).toBe(true);
    expect(isValidSubject('agentmesh..runs', true)).toBe(false);
  });
});

describe('subjectMatches', () => {
  it('matches exact subjects, `*` as one token and `>` as one or more trailing tokens', () => {
    expect(subjectMatches('a.b.c', 'a.b.c')).toBe(true);
    expect(subjectMatches('a.*.c', 'a.b.c')).toBe(true);
    expect(subjectMatches('a.*', 'a.b.c')).toBe(false);
    expect(subjectMatches('a.>', 'a.b.c')).toBe(true);
    expect(subjectMatches('a.>', 'a')).toBe(false);
    expect(subjectMatches('>', 'a')).toBe(true);
    expect(subjectMatches('a.b', 'a.bc')).toBe(false);
    expect(subjectMatches('a.bc', 'a.b')).toBe(false);
    expect(subjectMatches('a.b.c', 'a.b')).toBe(false);
    expect(subjectMatches('agentmesh.runs.*.cancel', 'agentmesh.runs.r-1.cancel')).toBe(true);
    expect(subjectMatches('agentmesh.runs.*.cancel', 'agentmesh.runs.r-1.events')).toBe(false);
  });

  it('agrees with the token-by-token rule on 20,000 random pattern and subject pairs', () => {
    const tokens = ['a', 'b', 'ab', 'ba', '*', '>', 'runs', 'r-1'];
    const rand = seeded(7);
    const make = (wild: boolean) =>
      Array.from({ length: 1 + rand(4) }, () => {
        const t = tokens[rand(tokens.length)]!;
        return !wild && (t === '*' || t === '>') ? 'x' : t;
      }).join('.');
    for (let i = 0; i < 20_000; i++) {
      const pattern = make(true);
      const subject = i % 5 === 0 ? pattern.replaceAll('*', 'a').replaceAll('>', 'b.c') : make(false);
      expect(subjectMatches(pattern, subject), `${pattern} ~ ${subject}`).toBe(byTokens(pattern, subject));
    }
  });
});
