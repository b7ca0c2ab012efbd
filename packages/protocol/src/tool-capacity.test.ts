import { afterEach, describe, expect, it } from 'vitest';
import { MemoryBus } from './bus/memory-bus.js';
import { publishJson } from './rpc.js';
import { CapacityWaiters } from './tool-capacity.js';

const CAPACITY = 'agentmesh.tool.capacity.math.calc';
const TOOL = 'agentmesh.tool.invoke.math.calc';
const notice = (invoke: string, free: number) => ({ worker_id: 'w1', tool: 'math.calc', invoke, free });

const buses: MemoryBus[] = [];
afterEach(async () => {
  for (const bus of buses.splice(0)) await bus.close();
});

function setup() {
  const bus = new MemoryBus();
  buses.push(bus);
  return { bus, waiters: new CapacityWaiters(bus) };
}

describe('CapacityWaiters', () => {
  it('wakes as many waiting calls as a notice has room for, oldest first, with the worker’s subject', async () => {
    const { bus, waiters } = setup();
    const woken: string[] = [];
    const waits = ['a', 'b', 'c'].map((name) =>
      waiters.wait(CAPACITY, TOOL, 60_000).then((invoke) => woken.push(`${name}:${invoke}`)),
    );
    publishJson(bus, CAPACITY, notice(`${TOOL}.Wone`, 2));
    await Promise.all(waits.slice(0, 2));
    expect(woken).toEqual([`a:${TOOL}.Wone`, `b:${TOOL}.Wone`]);
    expect(waiters.waiting).toBe(1);
    publishJson(bus, CAPACITY, notice(`${TOOL}.Wtwo`, 5));
    await waits[2];
    expect(woken.at(-1)).toBe(`c:${TOOL}.Wtwo`);
    expect(waiters.waiting).toBe(0);
  });

  it('ignores notices that are malformed or name a subject that is not one worker’s own for this tool', async () => {
    const { bus, waiters } = setup();
    const waiting = waiters.wait(CAPACITY, TOOL, 60_000);
    for (const body of [
      notice('agentmesh.tool.invoke.math.other', 1),
      notice(`${TOOL}.lowercase`, 1),
      notice(`${TOOL}.Wok.deeper`, 1),
      notice(`${TOOL}`, 1),
      { ...notice(`${TOOL}.Wok`, 1), free: 0 },
      { ...notice(`${TOOL}.Wok`, 1), extra: true },
      'not json at all',
    ])
      publishJson(bus, CAPACITY, body);
    await bus.flush();
    expect(waiters.waiting).toBe(1);
    publishJson(bus, CAPACITY, notice(`${TOOL}.Wok`, 1));
    expect(await waiting).toBe(`${TOOL}.Wok`);
  });

  it('resolves undefined when the delay runs out or the signal aborts', async () => {
    const { waiters } = setup();
    expect(await waiters.wait(CAPACITY, TOOL, 5)).toBeUndefined();
    const controller = new AbortController();
    const waiting = waiters.wait(CAPACITY, TOOL, 60_000, controller.signal);
    controller.abort();
    expect(await waiting).toBeUndefined();
    expect(waiters.waiting).toBe(0);
  });
});
