/**
 * Acceptance first: on the durable intake a new run is set up (its tool list asked of the catalog, `run.started`, its
 * first model turn) only once its `run.accepted` is stored in the event log. A planner whose event log holds the
 * append of `run.accepted` back asks the catalog nothing until the append lands, then runs the run to its end; a
 * cancel that comes while the append is held is not lost: the run ends cancelled.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { NatsBus, encodeJson, subjects, type EventLog, type EventLogOptions } from '@agentmesh/protocol';
import { submitRun } from '@agentmesh/planner';
import { startNatsFleet, type NatsFleet } from './helpers/fleet.js';
import { until, waitForRunEnd } from './helpers/wait.js';

const natsUrl = inject('natsUrl');
let fleet: NatsFleet;
let plannerBus: NatsBus;

interface Gate {
  held: boolean;
  release: () => void;
  opened: Promise<void>;
}
/** Runs whose `run.accepted` append is held until their gate is released. */
const gates = new Map<string, Gate>();

function gate(runId: string): Gate {
  let release!: () => void;
  const opened = new Promise<void>((r) => (release = r));
  const g = { held: false, release, opened };
  gates.set(runId, g);
  return g;
}

/** The event log of `bus`, with the append of event 1 of a gated run held until its gate opens. */
function gatedBackend(bus: NatsBus): NatsBus {
  const gated = (log: EventLog): EventLog =>
    Object.assign(Object.create(log) as EventLog, {
      append: async (...args: Parameters<EventLog['append']>) => {
        const held = [...gates].find(([runId]) => args[0].includes(runId))?.[1];
        if (args[1] === 1 && held !== undefined) {
          held.held = true;
          await held.opened;
        }
        return log.append(...args);
      },
    });
  return new Proxy(bus, {
    get(target, key) {
      if (key === 'eventLog')
        return async (options: EventLogOptions) => gated(await target.eventLog(options));
      const value = Reflect.get(target, key, target) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/** Waits until every message sent so far, by the client and by the planner, has been handled by its receiver. */
async function settleWire(): Promise<void> {
  await fleet.client.nc.flush();
  await plannerBus.nc.flush();
  await fleet.client.nc.flush();
}

beforeAll(async () => {
  fleet = await startNatsFleet(natsUrl, { prefixTag: 'acf' });
  plannerBus = await NatsBus.connect(natsUrl);
  await fleet.planner('acf-planner', { bus: gatedBackend(plannerBus) });
});
afterAll(async () => {
  // the planner drains on its connection, which closes after it
  await fleet.stop();
  await plannerBus.close();
});

describe('acceptance first', () => {
  it('a run asks the catalog for its tools only after its run.accepted is stored', async () => {
    const { client, prefix } = fleet;
    const runId = 'acf-run-1';
    const held = gate(runId);
    const lists: number[] = [];
    const listening = client.subscribe(subjects(prefix).catalogList, () => {
      lists.push(Date.now());
    });
    await client.nc.flush();
    await submitRun(client, { id: runId, task: 'hello', script: [{ text: 'hi' }] }, { prefix });
    await until('the append of run.accepted', () => held.held, 20_000);
    await settleWire();
    expect(lists).toEqual([]);
    held.release();
    const end = await waitForRunEnd(client, runId, { prefix, timeoutMs: 20_000 });
    expect(end).toMatchObject({ type: 'run.completed', status: 'done' });
    expect(lists.length).toBeGreaterThanOrEqual(1);
    listening.unsubscribe();
  }, 60_000);

  it('a cancel sent while run.accepted is being stored ends the run cancelled', async () => {
    const { client, prefix } = fleet;
    const runId = 'acf-run-2';
    const held = gate(runId);
    await submitRun(client, { id: runId, task: 'hello', script: [{ text: 'hi' }] }, { prefix });
    await until('the append of run.accepted', () => held.held, 20_000);
    client.publish(subjects(prefix).runCancel(runId), encodeJson({ reason: 'changed my mind' }));
    await settleWire();
    held.release();
    const end = await waitForRunEnd(client, runId, { prefix, timeoutMs: 20_000 });
    expect(end).toMatchObject({ type: 'run.completed', status: 'cancelled' });
  }, 60_000);
});
