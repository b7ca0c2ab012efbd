import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { memoryBackend, type Logger, type RunEvent } from '@agentmesh/protocol';
import { cancelQueuedRun, type QueuedCancelDeps } from './queued-cancel.js';
import { QueuedSet } from './queued-set.js';
import type { WaitingPlace } from './waiting-message.js';

const ts = new Date().toISOString();

/** A waiting run's stored events; `submitSeq` undefined is a `run.queued` of an older planner. */
function waitingEvents(runId: string, submitSeq: number | undefined): RunEvent[] {
  return [
    { type: 'run.accepted', run_id: runId, seq: 1, ts, task: 'waits' },
    {
      ...{ type: 'run.queued', run_id: runId, seq: 2, ts, tenant: 't', priority: 3, position: 1 },
      ...(submitSeq === undefined ? {} : { submit_seq: submitSeq }),
    },
  ];
}

async function cancelDeps(removeWaiting: QueuedCancelDeps['removeWaiting'], submitSeq: number | undefined) {
  const backend = memoryBackend();
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n')) if (line.trim()) lines.push(JSON.parse(line));
      done();
    },
  });
  const stored: RunEvent[] = [];
  const deps: QueuedCancelDeps = {
    records: await backend.kv('records'),
    plannerId: 'p1',
    logger: pino({ level: 'info' }, sink) as unknown as Logger,
    readRunEvents: async (runId) => waitingEvents(runId, submitSeq),
    eventPublisher: () => ({
      publish: (e) => stored.push(e),
      flush: async () => undefined,
      close: () => undefined,
    }),
    waiting: new QueuedSet(async () => backend.kv('waiting')),
    removeWaiting,
  };
  return { deps, lines, stored };
}

describe('cancel of a waiting run and its queue message', () => {
  it('deletes the message by the place run.queued gives, after run.completed is stored', async () => {
    const places: WaitingPlace[] = [];
    let storedFirst = false;
    const { deps, stored } = await cancelDeps(async (_runId, place) => {
      storedFirst = stored.some((e) => e.type === 'run.completed');
      places.push(place);
      return true;
    }, 17);
    expect(await cancelQueuedRun(deps, 'run-1', 'stop')).toMatchObject({ kind: 'cancelled', tenant: 't' });
    expect(places).toEqual([{ tenant: 't', priority: 3, submitSeq: 17 }]);
    expect(storedFirst).toBe(true);
  });

  it('passes no seq for an older run.queued, and the cancel holds as before', async () => {
    const places: WaitingPlace[] = [];
    const { deps } = await cancelDeps(async (_runId, place) => (places.push(place), false), undefined);
    expect(await cancelQueuedRun(deps, 'run-2', 'stop')).toMatchObject({ kind: 'cancelled' });
    expect(places).toEqual([{ tenant: 't', priority: 3, submitSeq: undefined }]);
  });

  it('logs a failed delete with the run id and still answers cancelled', async () => {
    const { deps, lines, stored } = await cancelDeps(async () => {
      throw new Error('permissions violation');
    }, 5);
    expect(await cancelQueuedRun(deps, 'run-3', 'stop')).toMatchObject({ kind: 'cancelled' });
    expect(stored.map((e) => e.type)).toEqual(['run.completed']);
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(lines).toContainEqual(
      expect.objectContaining({ level: 40, run_id: 'run-3', err: 'permissions violation' }),
    );
  });
});
