/**
 * Acceptance first: on the durable intake a new run is set up (its tool list asked of the catalog, `run.started`, its
 * first model turn) only once its `run.accepted` is stored in the event log. A planner whose event log holds the
 * append of `run.accepted` back asks the catalog nothing until the append lands, then runs the run to its end.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { NatsBus, subjects, type EventLog, type EventLogOptions } from '@agentmesh/protocol';
import { submitRun } from '@agentmesh/planner';
import { startNatsFleet, type NatsFleet } from './helpers/fleet.js';
import { until, waitForRunEnd } from './helpers/wait.js';

const natsUrl = inject('natsUrl');
let fleet: NatsFleet;

beforeAll(async () => {
  fleet = await startNatsFleet(natsUrl, { prefixTag: 'acf' });
});
afterAll(() => fleet.stop());

/** The event log of `bus`, with the append of event 1 of `runId` held until `release()`; `held` says it was asked. */
function holdFirstAppend(bus: NatsBus, runId: string) {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const state = { held: false };
  const gated = (log: EventLog): EventLog =>
    Object.assign(Object.create(log) as EventLog, {
      append: async (...args: Parameters<EventLog['append']>) => {
        if (args[1] === 1 && args[0].includes(runId)) {
          state.held = true;
          await gate;
        }
        return log.append(...args);
      },
    });
  const backend = new Proxy(bus, {
    get(target, key) {
      if (key === 'eventLog')
        return async (options: EventLogOptions) => gated(await target.eventLog(options));
      const value = Reflect.get(target, key, target) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { backend, state, release };
}

describe('acceptance first', () => {
  it('a run asks the catalog for its tools only after its run.accepted is stored', async () => {
    const { client, prefix } = fleet;
    const runId = 'acf-run-1';
    const bus = await NatsBus.connect(natsUrl);
    fleet.onStop(() => bus.close());
    const { backend, state, release } = holdFirstAppend(bus, runId);
    const lists: number[] = [];
    const listening = client.subscribe(subjects(prefix).catalogList, () => lists.push(Date.now()));
    await client.nc.flush();
    await fleet.planner('acf-planner', { bus: backend });
    await submitRun(client, { id: runId, task: 'hello', script: [{ text: 'hi' }] }, { prefix });
    await until('the append of run.accepted', () => state.held, 20_000);
    // whatever the planner sent before this round trip on its connection has reached the client's subscription
    await bus.nc.flush();
    await client.nc.flush();
    expect(lists).toEqual([]);
    release();
    const end = await waitForRunEnd(client, runId, { prefix, timeoutMs: 20_000 });
    expect(end).toMatchObject({ type: 'run.completed', status: 'done' });
    expect(lists.length).toBeGreaterThanOrEqual(1);
    listening.unsubscribe();
  }, 60_000);
});
