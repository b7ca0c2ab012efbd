import { describe, expect, it } from 'vitest';
import {
  assertToolName,
  fromProviderAlias,
  matchesToolPattern,
  toProviderAlias,
  toolNameProblem,
  PROVIDER_NAME_PATTERN,
} from './names.js';
import { subjects } from './subjects.js';

describe('canonical tool names', () => {
  it.each(['math.calc', 'crypto.sha256', 'fs.read_file', 'tool_search', 'a.b2.c_d'])('accepts %s', (name) => {
    expect(toolNameProblem(name)).toBeUndefined();
    const alias = toProviderAlias(name);
    expect(alias).toMatch(PROVIDER_NAME_PATTERN);
    expect(fromProviderAlias(alias)).toBe(name);
  });

  it.each([
    ['', /empty/],
    ['Math.calc', /lowercase/],
    ['math..calc', /lowercase/],
    ['math.calc.', /lowercase/],
    ['1math', /lowercase/],
    ['math__calc', /__/],
    ['math-calc', /lowercase/],
    ['a'.repeat(65), /longer than 64/],
    ['a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.zz', /provider name/],
  ])('rejects %j', (name, why) => {
    expect(toolNameProblem(name)).toMatch(why);
    expect(() => assertToolName(name)).toThrow(why);
  });

  it('bounds the provider alias at 64 characters exactly', () => {
    const atLimit = `a${'.a'.repeat(21)}`;
    expect(toProviderAlias(atLimit)).toHaveLength(64);
    expect(toolNameProblem(atLimit)).toBeUndefined();
    expect(toolNameProblem(`${atLimit}b`)).toMatch(/provider name/);
  });

  it('maps the contract example', () => {
    expect(toProviderAlias('fs.read_file')).toBe('fs__read_file');
    expect(fromProviderAlias('fs__read_file')).toBe('fs.read_file');
  });

  it('matches allow-list entries: exact names, namespaces and globs', () => {
    expect(matchesToolPattern('fs.read_file', 'fs')).toBe(true);
    expect(matchesToolPattern('fsx.read', 'fs')).toBe(false);
    expect(matchesToolPattern('crypto.sha256', 'crypto.*')).toBe(true);
    expect(matchesToolPattern('git.a.b', 'git.*')).toBe(false);
    expect(matchesToolPattern('git.a.b', 'git.**')).toBe(true);
    expect(matchesToolPattern('fs.search_files', 'fs.search_files')).toBe(true);
  });

  it('keeps glob semantics: `*` within a segment, `**` across, runs of stars collapse', () => {
    expect(matchesToolPattern('crypto.sha256', 'crypto.sha*')).toBe(true);
    expect(matchesToolPattern('crypto.sha256', '*.sha*')).toBe(true);
    expect(matchesToolPattern('a.b.sha256', '*.sha*')).toBe(false);
    expect(matchesToolPattern('a.b.sha256', '**.sha*')).toBe(true);
    expect(matchesToolPattern('a.b.sha256', 'a.***6')).toBe(true);
    expect(matchesToolPattern('fs.read_file', 'fs.*_*')).toBe(true);
    expect(matchesToolPattern('fs.read.file', 'fs.*_*')).toBe(false);
    expect(matchesToolPattern('math.calc', 'math.calc*')).toBe(true);
    expect(matchesToolPattern('math', 'math.**')).toBe(false);
    expect(matchesToolPattern('math.calc', 'math.calc.*')).toBe(false);
  });

  it('agrees with the RegExp it replaces on 20,000 random short patterns and names', () => {
    let seed = 11;
    const pick = <T>(items: readonly T[]): T => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return items[(seed >>> 12) % items.length] as T;
    };
    for (let k = 0; k < 20_000; k++) {
      const pattern = Array.from({ length: 1 + (k % 7) }, () =>
        pick(['a', 'b', '.', '*', '**', '_', 'ab', 'a.']),
      ).join('');
      const name = Array.from({ length: k % 11 }, () => pick(['a', 'b', '.', '_'])).join('');
      const source = pattern
        .split(/(\*\*|\*)/)
        .map((part) => (part === '**' ? '.*' : part === '*' ? '[^.]*' : part.replaceAll('.', '\\.')))
        .join('');
      const special = name === pattern || pattern === '*' || pattern === '**' || !pattern.includes('*');
      const oracle = special ? undefined : new RegExp(`^${source}$`);
      const expected =
        oracle?.test(name) ?? (pattern.includes('*') || name === pattern || name.startsWith(pattern + '.'));
      expect(matchesToolPattern(name, pattern), `${pattern} on ${name}`).toBe(expected);
    }
  });

  const name27 = 'a'.repeat(13) + '.' + 'a'.repeat(13);
  it.each([
    ['24 "*" then "z"', '*'.repeat(24) + 'z', name27, 'a'.repeat(26) + 'z'],
    ['40 "*" then "z"', '*'.repeat(40) + 'z', name27, 'a'.repeat(26) + 'z'],
    ['"*." 20 times then "z"', '*.'.repeat(20) + 'z', 'a.'.repeat(31) + 'a', 'a.'.repeat(20) + 'z'],
    ['"**." 20 times then "z"', '**.'.repeat(20) + 'z', 'a.'.repeat(31) + 'a', 'a.'.repeat(31) + 'z'],
    ['"a*" 30 times then "b"', 'a*'.repeat(30) + 'b', 'a'.repeat(64), 'a'.repeat(63) + 'b'],
    ['"a**" 30 times then "b"', 'a**'.repeat(30) + 'b', 'a.'.repeat(32), 'a.'.repeat(31) + 'b'],
    [
      '"*a" 40 times, 128 characters',
      ('*a'.repeat(40) + '*').padEnd(127, '*') + 'b',
      'a'.repeat(64),
      'a'.repeat(63) + 'b',
    ],
  ])('answers a backtracking glob (%s) at once', (_label, pattern, missing, matching) => {
    const started = performance.now();
    expect(matchesToolPattern(missing, pattern)).toBe(false);
    expect(matchesToolPattern(matching, pattern)).toBe(true);
    expect(performance.now() - started).toBeLessThan(100);
  });

  it('builds subjects and refuses a tool subject for a bad name', () => {
    const s = subjects('agentmesh');
    expect(s.runEvents('r1')).toBe('agentmesh.runs.r1.events');
    expect(s.toolInvoke('math.calc')).toBe('agentmesh.tool.invoke.math.calc');
    expect(() => s.toolInvoke('Bad Name')).toThrow(/lowercase/);
    expect(subjects('acme').runsSubmit).toBe('acme.runs.submit');
  });
});
