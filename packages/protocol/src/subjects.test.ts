import { describe, expect, it } from 'vitest';
import {
  runControlSubjects,
  runIdOfSubject,
  subjects,
  tenantApiSubjects,
  tenantOfSubject,
  tenantSubjects,
} from './subjects.js';

describe('runIdOfSubject', () => {
  it('reads the run id back from the subjects that carry one', () => {
    expect(runIdOfSubject('agentmesh', subjects('agentmesh').runCancel('run-1'), 'cancel')).toBe('run-1');
    expect(runIdOfSubject('team.a', runControlSubjects('team.a').input('r_2'), 'input')).toBe('r_2');
    expect(runIdOfSubject('agentmesh', runControlSubjects().approve('r-3'), 'approve')).toBe('r-3');
  });

  it('is undefined for another prefix, another verb, an empty id or an id of several tokens', () => {
    expect(runIdOfSubject('other', subjects('agentmesh').runCancel('run-1'), 'cancel')).toBeUndefined();
    expect(runIdOfSubject('agentmesh', subjects('agentmesh').runCancel('run-1'), 'input')).toBeUndefined();
    expect(runIdOfSubject('agentmesh', 'agentmesh.runs..cancel', 'cancel')).toBeUndefined();
    expect(runIdOfSubject('agentmesh', 'agentmesh.runs.a.b.cancel', 'cancel')).toBeUndefined();
  });
});

describe('tenant subjects', () => {
  it('builds one tenant API under <prefix>.tenant.<tenant> and reads the tenant back from a subject', () => {
    const t = subjects('agentmesh').tenant('acme');
    expect(t.runsSubmit).toBe('agentmesh.tenant.acme.runs.submit');
    expect(t.run('r-1', 'approve')).toBe('agentmesh.tenant.acme.runs.r-1.approve');
    expect(t.runEvents('r-1')).toBe('agentmesh.tenant.acme.runs.r-1.events');
    expect(t.sessions('show')).toBe('agentmesh.tenant.acme.sessions.show');
    expect(t.catalog('search')).toBe('agentmesh.tenant.acme.catalog.search');
    expect(tenantOfSubject('agentmesh', t.run('r-1', 'cancel'))).toEqual({
      tenant: 'acme',
      rest: ['runs', 'r-1', 'cancel'],
    });
    expect(tenantApiSubjects('team.a').run('history')).toBe('team.a.tenant.*.runs.*.history');
  });

  it('refuses a tenant or run id that would change the subject, and reads no tenant from a foreign subject', () => {
    for (const bad of ['ACME', 'a.b', '*', '>', '', 'a b'])
      expect(() => tenantSubjects('agentmesh', bad)).toThrow();
    expect(() => tenantSubjects('agentmesh', 'acme').run('a.b', 'show')).toThrow(/run id/);
    expect(tenantOfSubject('agentmesh', 'agentmesh.runs.r1.approve')).toBeUndefined();
    expect(tenantOfSubject('agentmesh', 'agentmesh.tenant.ACME.runs.list')).toBeUndefined();
    expect(tenantOfSubject('other', 'agentmesh.tenant.acme.runs.list')).toBeUndefined();
    expect(tenantOfSubject('agentmesh', 'agentmesh.tenant.acme')).toBeUndefined();
  });
});
