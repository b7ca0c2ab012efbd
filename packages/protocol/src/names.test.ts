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

  it('builds subjects and refuses a tool subject for a bad name', () => {
    const s = subjects('agentmesh');
    expect(s.runEvents('r1')).toBe('agentmesh.runs.r1.events');
    expect(s.toolInvoke('math.calc')).toBe('agentmesh.tool.invoke.math.calc');
    expect(() => s.toolInvoke('Bad Name')).toThrow(/lowercase/);
    expect(subjects('acme').runsSubmit).toBe('acme.runs.submit');
  });
});
