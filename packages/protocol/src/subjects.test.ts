import { describe, expect, it } from 'vitest';
import { runControlSubjects, runIdOfSubject, subjects } from './subjects.js';

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
