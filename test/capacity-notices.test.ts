import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { z } from 'zod';
import {
  ToolCapacitySchema,
  connectBus,
  invokeTool,
  publishJson,
  silentLogger,
  subjects,
  type Backend,
  type BusMessage,
  type ToolCapacity,
  type ToolOutcome,
} from '@agentmesh/protocol';
import { ToolWorker, defineTool, type Tool } from '@agentmesh/tool-worker';

// Workers that turn calls away `busy` say on `<prefix>.tool.capacity.<tool>` when they have room again, and the
// waiting callers send straight to that worker: real NATS, workers and caller on connections of their own.

const natsUrl = inject('natsUrl');
const prefix = `cap${process.pid}x${Date.now().toString(36)}`;
const s = subjects(prefix);

const napTool = (name: string) =>
  defineTool({
    name,
    description: 'Sleeps for ms.',
    input: z.object({ ms: z.number() }),
    idempotent: true,
    handler: async ({ ms }, ctx) => {
      await new Promise((resolve) => setTimeout(resolve, ms));
      return { worker: ctx.workerId };
    },
  });

let caller: Backend;
let observer: Backend;
const buses: Backend[] = [];
const workers: ToolWorker[] = [];

async function startWorker(
  tools: Tool<any, any>[],
  concurrency: number,
  threads?: number,
): Promise<ToolWorker> {
  const bus = await connectBus({ natsUrl });
  buses.push(bus);
  const worker = new ToolWorker({
    bus,
    tools,
    prefix,
    logger: silentLogger(),
    register: false,
    concurrency,
    ...(threads === undefined ? {} : { threads }),
  });
  await worker.start();
  await bus.flush();
  workers.push(worker);
  return worker;
}

/** Every send of the calls of `tool` (subject and call id), and every capacity notice about it. */
async function watchTool(tool: string) {
  const sends: { subject: string; callId: string }[] = [];
  const notices: ToolCapacity[] = [];
  const recordSend = (msg: BusMessage) =>
    void sends.push({
      subject: msg.subject,
      callId: (JSON.parse(msg.text()) as { call_id: string }).call_id,
    });
  const subs = [
    observer.subscribe(`${s.toolInvoke(tool)}.>`, recordSend),
    observer.subscribe(s.toolInvoke(tool), recordSend),
    observer.subscribe(
      s.toolCapacity(tool),
      (msg) => void notices.push(ToolCapacitySchema.parse(JSON.parse(msg.text()))),
    ),
  ];
  await observer.flush();
  return { sends, notices, stop: () => subs.forEach((sub) => sub.unsubscribe()) };
}

const hashTool = (name: string) =>
  defineTool({
    name,
    description: 'Hashes on a thread.',
    input: z.object({ rounds: z.number(), bytes: z.number(), seed: z.string().optional() }),
    cpu: { module: new URL('./fixtures/worker-cpu-task.mjs', import.meta.url), export: 'hashRounds' },
  });

let seq = 0;
const call = (tool: string, ms: number) =>
  invokeTool(caller, { call_id: `cap-${++seq}`, run_id: 'run-cap', tool, arguments: { ms } }, { prefix });

beforeAll(async () => {
  caller = await connectBus({ natsUrl });
  observer = await connectBus({ natsUrl });
});
afterAll(async () => {
  await Promise.all(workers.map((w) => w.drain()));
  await Promise.all([caller, observer, ...buses].map((b) => b.close()));
});

describe('capacity notices', () => {
  it('send a call a full worker turned away straight to that worker once it has room, without polling it', async () => {
    const worker = await startWorker([napTool('cap.solo')], 1);
    const seen = await watchTool('cap.solo');
    const first = call('cap.solo', 800);
    const second = call('cap.solo', 1);
    const outcomes: ToolOutcome[] = await Promise.all([first, second]);
    seen.stop();

    expect(outcomes.map((o) => o.is_error)).toEqual([false, false]);
    const secondId = outcomes[1]!.call_id;
    const secondSends = seen.sends.filter((send) => send.callId === secondId);
    // waiting out 800 ms with the plain busy backoff (2 ms doubling to 50 ms) would take about 20 sends
    expect(secondSends.length).toBeLessThanOrEqual(7);
    const notice = seen.notices.find((n) => n.worker_id === worker.workerId);
    expect(notice).toMatchObject({ tool: 'cap.solo', free: 1 });
    expect(notice!.invoke).toMatch(new RegExp(`^${s.toolInvoke('cap.solo').replaceAll('.', '\\.')}\\.W`));
    expect(secondSends.at(-1)?.subject).toBe(notice!.invoke);
  });

  it('spread a burst over two full replicas, each call running once, with few sends', async () => {
    const a = await startWorker([napTool('cap.pair')], 2);
    const b = await startWorker([napTool('cap.pair')], 2);
    const seen = await watchTool('cap.pair');
    const outcomes = await Promise.all(Array.from({ length: 12 }, () => call('cap.pair', 150)));
    seen.stop();

    expect(outcomes.every((o) => !o.is_error)).toBe(true);
    const byWorker = new Map<string, number>();
    for (const o of outcomes) byWorker.set(o.worker_id, (byWorker.get(o.worker_id) ?? 0) + 1);
    expect([...byWorker.keys()].sort()).toEqual([a.workerId, b.workerId].sort());
    expect(Math.min(...byWorker.values())).toBeGreaterThanOrEqual(4);
    expect(seen.notices.length).toBeGreaterThan(0);
    // 8 calls wait up to 450 ms: polling at 25-50 ms would send each of them again about 12 times
    expect(seen.sends.length).toBeLessThan(12 * 4);
  });

  it('send a CPU call a full replica turned away by name to a full peer, which queues it: no round of the queue group', async () => {
    // 1 thread and 1 queued call each: 8 calls are 2 running, 2 queued and 4 turned away at first
    const a = await startWorker([hashTool('cap.cpu')], 16, 1);
    const b = await startWorker([hashTool('cap.cpu')], 16, 1);
    const seen = await watchTool('cap.cpu');
    const outcomes = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        invokeTool(
          caller,
          {
            call_id: `cap-${++seq}`,
            run_id: 'run-cap',
            tool: 'cap.cpu',
            arguments: { rounds: 400, bytes: 1 << 20, seed: String(i) },
          },
          { prefix },
        ),
      ),
    );
    seen.stop();
    expect(outcomes.every((o) => !o.is_error)).toBe(true);
    const byWorker = new Map<string, number>();
    for (const o of outcomes) byWorker.set(o.worker_id, (byWorker.get(o.worker_id) ?? 0) + 1);
    // each holds at most 4 (1 running, 1 queued, 2 named): all 8 are placed before the first ends
    expect(byWorker.get(a.workerId)).toBe(4);
    expect(byWorker.get(b.workerId)).toBe(4);
    expect(a.cpuThreads + b.cpuThreads).toBeLessThanOrEqual(2);
    // each call turned away goes to a peer by name once one is known: the first busy answers can come before either
    // peer is known, and those are re-sent round the queue group (8-18 sends to it in all, by how the answers fall),
    // but once one call went to a peer by name, none goes round the queue group again
    const byName = seen.sends.findIndex((send) => send.subject !== s.toolInvoke('cap.cpu'));
    expect(byName).toBeGreaterThanOrEqual(8);
    expect(seen.sends.slice(byName).filter((send) => send.subject === s.toolInvoke('cap.cpu'))).toEqual([]);
  });

  it('wake a long queue of waiting calls one freed slot after another, not on their backoff', async () => {
    const worker = await startWorker([napTool('cap.queue')], 1);
    const seen = await watchTool('cap.queue');
    const started = performance.now();
    const outcomes = await Promise.all(Array.from({ length: 60 }, () => call('cap.queue', 5)));
    const elapsed = performance.now() - started;
    seen.stop();
    expect(outcomes.every((o) => !o.is_error)).toBe(true);
    // a notice for every freed slot while calls wait, each taken by a waiting call
    expect(seen.notices.filter((n) => n.worker_id === worker.workerId).length).toBeGreaterThanOrEqual(50);
    // 60 calls of 5 ms one after another; calls left to their backoff (50 ms doubling to 1 s) take seconds
    expect(elapsed).toBeLessThan(2_000);
  });

  it('ignore a notice that points at another tool, and outlive one that points at a worker that is gone', async () => {
    const worker = await startWorker([napTool('cap.held')], 1);
    await startWorker([napTool('cap.other')], 4);
    const first = call('cap.held', 600);
    const second = call('cap.held', 1);
    const forged = (invoke: string): ToolCapacity => ({
      worker_id: 'forger',
      tool: 'cap.held',
      invoke,
      free: 5,
    });
    // another tool's subject would answer unknown_tool, a lowercase token is no worker's, a subject nobody serves
    // answers no_responders; sent over and over while the first call holds the worker, so they meet a waiting call
    const notices = [
      forged(s.toolInvoke('cap.other')),
      forged(`${s.toolInvoke('cap.held')}.lowercase`),
      forged(`${s.toolInvoke('cap.held')}.Wgone`),
      { worker_id: 'forger', free: 'lots' },
    ];
    const forger = setInterval(() => {
      for (const notice of notices) publishJson(observer, s.toolCapacity('cap.held'), notice);
    }, 5);
    void first.finally(() => clearInterval(forger));

    const outcomes = await Promise.all([first, second]);
    expect(outcomes.map((o) => [o.is_error, o.worker_id])).toEqual([
      [false, worker.workerId],
      [false, worker.workerId],
    ]);
  });
});
