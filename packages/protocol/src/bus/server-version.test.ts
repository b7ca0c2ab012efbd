import { describe, expect, it } from 'vitest';
import { clusteredCasWarning } from './server-version.js';

describe('clusteredCasWarning', () => {
  it('names a clustered server older than 2.9.21, its cluster and the version to upgrade to', () => {
    expect(clusteredCasWarning({ version: '2.9.10', cluster: 'c1' })).toBe(
      'nats-server 2.9.10 in cluster "c1" may accept two racing compare-and-set writes to a replicated bucket ' +
        '(nats-server#4320): upgrade every node to 2.9.21 or later',
    );
    expect(clusteredCasWarning({ version: '2.9.20', cluster: 'c1' })).toContain('2.9.20');
    expect(clusteredCasWarning({ version: '2.8.4-beta.1', cluster: 'c1' })).toContain('2.8.4-beta.1');
  });

  it('says nothing of a newer clustered server or of a single one', () => {
    for (const version of ['2.9.21', '2.10.0', '2.11.4', '3.0.0', '2.10.0-RC.1'])
      expect(clusteredCasWarning({ version, cluster: 'c1' })).toBeUndefined();
    expect(clusteredCasWarning({ version: '2.9.10' })).toBeUndefined();
    expect(clusteredCasWarning(undefined)).toBeUndefined();
  });
});
