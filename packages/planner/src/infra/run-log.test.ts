import { describe, expect, it } from 'vitest';
import {
  AgentMeshError,
  ErrorCode,
  encodeJson,
  memoryBackend,
  openRunEventLog,
  silentLogger,
  subjects,
  type EventLog,
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

  it('appends an event on the turn it is published when its log is open', async () => {
    const log = await openRunEventLog(memoryBackend(), 'agentmesh');
    const appended: number[] = [];
    const counted = Object.assign(Object.create(log) as EventLog, {
      append: (...args: Parameters<EventLog['append']>) => {
        appended.push(args[1]);
        return log.append(...args);
      },
    });
    const publisher = logPublisher(() => counted, {
      prefix: 'agentmesh',
      runId: 'r1',
      logger: silentLogger(),
    });
    publisher.publish(event(1, 'run.accepted'));
    expect(appended).toEqual([1]);
    await publisher.flush();
  });

  it('stops retrying a failing append at once when it is closed, in the wait between attempts', async () => {
    const log = await openRunEventLog(memoryBackend(), 'agentmesh');
    let attempts = 0;
    const failing = Object.assign(Object.create(log) as EventLog, {
      append: () => {
        attempts++;
        return Promise.reject(new AgentMeshError(ErrorCode.Unavailable, 'no leader', { retryable: true }));
      },
    });
    const publisher = logPublisher(() => failing, {
      prefix: 'agentmesh',
      runId: 'r1',
      logger: silentLogger(),
    });
    publisher.publish(event(1));
    // after 4 failures the next wait is about 400 ms (50 ms doubling)
    while (attempts < 4) await new Promise((r) => setTimeout(r, 5));
    publisher.close();
    const closedAt = Date.now();
    await publisher.flush();
    expect(Date.now() - closedAt).toBeLessThan(250);
    expect(attempts).toBe(4);
  });
});
