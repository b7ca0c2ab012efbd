import { describe, expect, it } from 'vitest';
import type { RunEvent, RunEventBody } from '@agentmesh/protocol';
import { RunEventSink } from './events.js';

describe('RunEventSink', () => {
  it('stamps each event with run_id, a gapless seq and ts, in order', () => {
    const published: RunEvent[] = [];
    const sink = new RunEventSink('r1', (e) => published.push(e), { lastSeq: 4 });
    sink.emit({ type: 'run.started', planner_id: 'p1' });
    sink.emit({ type: 'llm.request', iteration: 1, tools: [] });
    expect(published.map((e) => [e.type, e.run_id, e.seq])).toEqual([
      ['run.started', 'r1', 5],
      ['llm.request', 'r1', 6],
    ]);
    expect(published[0]!.ts).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(Object.keys(published[0]!)).toEqual(['type', 'planner_id', 'run_id', 'seq', 'ts']);
  });

  it('a body emitted twice, or frozen, becomes two events: the first is not renumbered', () => {
    const published: RunEvent[] = [];
    const sink = new RunEventSink('r1', (e) => published.push(e));
    const body: RunEventBody = { type: 'run.warning', code: 'x', message: 'twice' };
    sink.emit(body);
    sink.emit(body);
    const frozen = Object.freeze({ type: 'run.warning', code: 'y', message: 'frozen' }) as RunEventBody;
    sink.emit(frozen);
    expect(published.map((e) => e.seq)).toEqual([1, 2, 3]);
    expect(published[0]).not.toBe(published[1]);
    expect(sink.events.map((e) => e.seq)).toEqual([1, 2, 3]);
  });
});
