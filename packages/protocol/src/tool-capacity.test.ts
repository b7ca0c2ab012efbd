import { afterEach, describe, expect, it, vi } from 'vitest';
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

describe('CapacityWaiters: full peers to name', () => {
  const busy = (worker: string, invoke?: string) => ({
    worker_id: worker,
    tool: 'math.calc',
    offers: true,
    ...(invoke === undefined ? {} : { invoke }),
  });
  afterEach(() => vi.useRealTimers());

  it('names another worker that turned a call away and queues by name, never the one that just refused', () => {
    const { waiters } = setup();
    expect(waiters.noteBusy(TOOL, busy('a', `${TOOL}.Wa`))).toBe('a');
    expect(waiters.fullPeer(TOOL, 'a')).toBeUndefined();
    expect(waiters.noteBusy(TOOL, busy('b', `${TOOL}.Wb`))).toBe('b');
    expect(waiters.fullPeer(TOOL, 'b')).toBe(`${TOOL}.Wa`);
    expect(waiters.fullPeer(TOOL, 'a')).toBe(`${TOOL}.Wb`);
    // the least recently named first: calls turned away together spread over the peers
    waiters.noteBusy(TOOL, busy('c', `${TOOL}.Wc`));
    expect([waiters.fullPeer(TOOL, 'x'), waiters.fullPeer(TOOL, 'x'), waiters.fullPeer(TOOL, 'x')]).toEqual([
      `${TOOL}.Wa`,
      `${TOOL}.Wb`,
      `${TOOL}.Wc`,
    ]);
    expect(waiters.fullPeer('agentmesh.tool.invoke.math.other', 'x')).toBeUndefined();
  });

  it('forgets a worker whose busy answer names no subject, or a subject not its own for this tool', () => {
    const { waiters } = setup();
    waiters.noteBusy(TOOL, busy('a', `${TOOL}.Wa`));
    waiters.noteBusy(TOOL, busy('a'));
    expect(waiters.fullPeer(TOOL, 'x')).toBeUndefined();
    for (const invoke of ['agentmesh.tool.invoke.math.other.Wa', `${TOOL}.lowercase`, `${TOOL}.Wa.deeper`]) {
      waiters.noteBusy(TOOL, busy('a', invoke));
      expect(waiters.fullPeer(TOOL, 'x')).toBeUndefined();
    }
    expect(waiters.noteBusy(TOOL, { tool: 'math.calc' })).toBeUndefined();
    expect(waiters.noteBusy(TOOL, undefined)).toBeUndefined();
  });

  it('forgets a full peer after a second', () => {
    vi.useFakeTimers();
    const { waiters } = setup();
    waiters.noteBusy(TOOL, busy('a', `${TOOL}.Wa`));
    vi.advanceTimersByTime(900);
    expect(waiters.fullPeer(TOOL, 'x')).toBe(`${TOOL}.Wa`);
    vi.advanceTimersByTime(200);
    expect(waiters.fullPeer(TOOL, 'x')).toBeUndefined();
  });
});
