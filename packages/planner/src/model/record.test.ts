import { describe, expect, it } from 'vitest';
import { encodeJson } from '@agentmesh/protocol';
import { firstRunRecord, runRecord } from './record.js';

describe('run records', () => {
  it('the record a new run is created with is the one runRecord builds, byte for byte', () => {
    const bases = [
      { run_id: 'r1', accepted_at: '2026-11-27T08:00:00.000Z', stream_seq: 7, task: 'add two numbers' },
      {
        run_id: 'r2',
        accepted_at: '2026-11-27T08:00:01.000Z',
        stream_seq: 8,
        task: 'child',
        tenant: 'acme',
        parent: { run_id: 'p1', call_id: 'c1' },
        forked_from: { run_id: 'o1', seq: 3 },
      },
    ];
    for (const base of bases) {
      const built = runRecord({ ...base, planner_id: 'planner-a', epoch: 1, lease_until: 1_000 });
      const first = firstRunRecord(base, 'planner-a', 1_000);
      expect(first).toEqual(built);
      expect(new TextDecoder().decode(encodeJson(first))).toBe(new TextDecoder().decode(encodeJson(built)));
    }
  });
});
