import { describe, expect, it } from 'vitest';
import { admittedConsumer, queuedRuns, tenantQueues, waitingConsumer } from './queue-view.js';

const facts = (name: string, pending: number, ackPending: number) => ({
  name,
  pending,
  ackPending,
  redelivered: 0,
});

describe('tenant queues from the runs stream consumers', () => {
  it('reads waiting runs by priority and admitted runs per tenant, names with dashes included', () => {
    const queues = tenantQueues([
      facts('agentmesh-planner', 7, 2),
      facts(waitingConsumer('a-w-1', 1), 3, 1),
      facts(waitingConsumer('a-w-1', 5), 2, 0),
      facts(admittedConsumer('a-w-1'), 1, 4),
      facts(admittedConsumer('w-x-3'), 2, 2),
    ]);
    expect([...queues.keys()].sort()).toEqual(['a-w-1', 'w-x-3']);
    const q = queues.get('a-w-1')!;
    expect(q.waiting).toEqual([3, 0, 0, 0, 2]);
    expect(q.waitingRunning).toEqual([1, 0, 0, 0, 0]);
    expect(q.admitted).toBe(1);
    expect(q.admittedRunning).toBe(4);
    expect(queuedRuns(q)).toBe(6);
    expect(queuedRuns(queues.get('w-x-3')!)).toBe(2);
  });
});
