import { describe, expect, it } from 'vitest';
import {
  encodeJson,
  memoryBackend,
  openRunEventLog,
  silentLogger,
  subjects,
  type RunEvent,
} from '@agentmesh/protocol';
import { loggedEvents, logPublisher } from './run-log.js';

const event = (seq: number, type: RunEvent['type'] = 'run.started'): RunEvent =>
  ({ type, run_id: 'r1', seq, ts: new Date().toISOString(), planner_id: 'p' }) as RunEvent;

describe('logPublisher', () => {
  it('appends events in order, gapless', async () => {
    const log = await openRunEventLog(memoryBackend(), 'agentmesh');
    const publisher = logPublisher(async () => log, {
      prefix: 'agentmesh',
      runId: 'r1',
      logger: silentLogger(),
    });
    for (let seq = 1; seq <= 3; seq++) publisher.publish(event(seq));
    await publisher.flush();
    expect((await loggedEvents(log, subjects('agentmesh').runEvents('r1'))).map((e) => e.seq)).toEqual([
      1, 2, 3,
    ]);
  });

  it('hands the run over when another event holds a seq it writes (a late write of a fenced planner)', async () => {
    const log = await openRunEventLog(memoryBackend(), 'agentmesh');
    const subject = subjects('agentmesh').runEvents('r1');
    await log.append(subject, 1, encodeJson(event(1)));
    await log.append(subject, 2, encodeJson({ ...event(2), planner_id: 'stale' }));
    let conflicts = 0;
    const publisher = logPublisher(async () => log, {
      prefix: 'agentmesh',
      runId: 'r1',
      logger: silentLogger(),
      onConflict: () => conflicts++,
    });
    publisher.publish(event(2));
    publisher.publish(event(3, 'run.completed'));
    await publisher.flush();
    expect(conflicts).toBe(1);
    publisher.publish(event(4));
    await publisher.flush();
    const stored = await loggedEvents(log, subject);
    expect(stored.map((e) => e.seq)).toEqual([1, 2]);
    expect(stored[1]).toMatchObject({ planner_id: 'stale' });
  });
});
