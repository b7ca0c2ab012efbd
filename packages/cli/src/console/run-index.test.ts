import { describe, expect, it } from 'vitest';
import { DEFAULT_PREFIX, MemoryBus, silentLogger, type RunEvent } from '@agentmesh/protocol';
import { RunIndex } from './run-index.js';

const ts = new Date().toISOString();
const event = (seq: number, body: Record<string, unknown>) =>
  ({ run_id: 'q1', seq, ts, ...body }) as RunEvent;

describe('RunIndex: runs waiting in the fair intake', () => {
  it('lists a run as queued with its place until it starts, then running', () => {
    const index = new RunIndex(new MemoryBus(), DEFAULT_PREFIX, silentLogger());
    index.add(event(1, { type: 'run.accepted', task: 't', identity: { tenant: 'acme' } }));
    index.add(event(2, { type: 'run.queued', tenant: 'acme', priority: 3, position: 4 }));
    expect(index.list({ status: 'queued', tenant: 'acme' })).toMatchObject([
      { run_id: 'q1', status: 'queued', queue_position: 4 },
    ]);
    index.add(event(3, { type: 'run.started', planner_id: 'p1', resumed: false }));
    expect(index.list({ status: 'queued' })).toEqual([]);
    expect(index.list({ status: 'running' })).toMatchObject([{ run_id: 'q1', queue_position: undefined }]);
  });
});
