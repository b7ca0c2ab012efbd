import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { z } from 'zod';
import {
  connectBus,
  invokeTool,
  parseJson,
  publishJson,
  silentLogger,
  subjects,
  type Bus,
  type ToolInvocationInput,
  type ToolOutcome,
  type ToolProgress,
} from '@agentmesh/protocol';
import { ToolWorker, defineTool, type Tool } from '@agentmesh/tool-worker';

/**
 * Cancel reaches a tool call wherever it waits. Each case measures, with performance.now(), the time from publishing
 * the run's cancel to (a) the caller's promise settling with `cancelled` (the caller aborts its call on the cancel
 * subject, as the planner does) and (b) the worker's answer to the call (seen by a tap on the reply subjects). Each
 * must be at most 50 ms.
 */

const natsUrl = inject('natsUrl');
const prefix = `wc${process.pid}x${Date.now().toString(36)}`;
const s = subjects(prefix);
const CPU_FIXTURE = new URL('./fixtures/worker-cpu-task.mjs', import.meta.url);
const BOUND_MS = 50;

const napTool = (name: string) =>
  defineTool({
    name,
    description: 'Sleeps until its time is up or its signal aborts (not idempotent).',
    input: z.object({ ms: z.number() }),
    handler: ({ ms }, ctx) =>
      new Promise<{ ms: number }>((resolve, reject) => {
        const timer = setTimeout(() => resolve({ ms }), ms);
        ctx.signal.addEventListener('abort', () => {
          clearTimeout(timer);
          reject(ctx.signal.reason as Error);
        });
      }),
  });
const spinTool = defineTool({
  name: 'cancel.spin',
  description: 'Spins on a piscina thread until it is stopped.',
  input: z.object({}),
  idempotent: true,
  retry: { max_attempts: 1 },
  timeoutMs: 60_000,
  cpu: { module: CPU_FIXTURE, export: 'spin' },
});

const buses: Bus[] = [];
const workers: ToolWorker[] = [];
let caller: Bus;
/** Outcomes seen on any reply subject, by call id, with the time they arrived. */
const answers = new Map<string, { outcome: ToolOutcome; at: number }>();
const answerWaiters = new Map<string, () => void>();

async function startWorker(
  tools: Tool<any, any>[],
  extra: Partial<ConstructorParameters<typeof ToolWorker>[0]> = {},
) {
  const bus = await connectBus({ natsUrl });
  buses.push(bus);
  const worker = new ToolWorker({ bus, tools, prefix, logger: silentLogger(), register: false, ...extra });
  await worker.start();
  workers.push(worker);
  return worker;
}

let seq = 0;
function call(tool: string, args: unknown, runId: string, extra: Partial<ToolInvocationInput> = {}) {
  return { call_id: `c-${++seq}`, run_id: runId, tool, arguments: args, ...extra };
}

/** Calls a tool as the planner does: the run's cancel subject aborts the call's signal. */
function plannerCall(invocation: ToolInvocationInput, onProgress?: (p: ToolProgress) => void) {
  const controller = new AbortController();
  const sub = caller.subscribe(s.runCancel(invocation.run_id), () => controller.abort());
  const promise = invokeTool(caller, invocation, {
    prefix,
    signal: controller.signal,
    ...(onProgress === undefined ? {} : { onProgress }),
  });
  let settledAt = 0;
  const settled = promise.then(
    (outcome) => ({ outcome, error: undefined }),
    (error: unknown) => ({ outcome: undefined, error }),
  );
  void settled.then(() => {
    settledAt = performance.now();
    void sub.drain();
  });
  return { settled, settledAt: () => settledAt };
}

function started(invocation: ToolInvocationInput) {
  let resolve!: (p: ToolProgress) => void;
  const seen = new Promise<ToolProgress>((r) => (resolve = r));
  return {
    seen,
    onProgress: (p: ToolProgress) => {
      if (p.kind === 'started' && p.call_id === invocation.call_id) resolve(p);
    },
  };
}

function workerAnswer(callId: string): Promise<{ outcome: ToolOutcome; at: number }> {
  const known = answers.get(callId);
  if (known !== undefined) return Promise.resolve(known);
  return new Promise((resolve) => answerWaiters.set(callId, () => resolve(answers.get(callId)!)));
}

/** Publishes the run's cancel and measures both ends; returns the two latencies in ms. */
async function cancelAndMeasure(runId: string, pending: ReturnType<typeof plannerCall>, callId: string) {
  const answered = workerAnswer(callId);
  const t0 = performance.now();
  publishJson(caller, s.runCancel(runId), { reason: 'measured' });
  const result = await pending.settled;
  const answer = await answered;
  expect(result.outcome).toBeUndefined();
  expect(result.error).toMatchObject({ code: 'cancelled', details: { call_id: callId } });
  expect(answer.outcome).toMatchObject({ is_error: true, error: { code: 'cancelled' } });
  return { caller: pending.settledAt() - t0, worker: answer.at - t0 };
}

beforeAll(async () => {
  caller = await connectBus({ natsUrl });
  const tap = await connectBus({ natsUrl });
  buses.push(caller, tap);
  tap.subscribe('_INBOX.>', (msg) => {
    const at = performance.now();
    let body: Partial<ToolOutcome> & { kind?: unknown };
    try {
      body = parseJson(msg.data) as typeof body;
    } catch {
      return;
    }
    if (typeof body.call_id !== 'string' || typeof body.is_error !== 'boolean' || body.kind !== undefined)
      return;
    answers.set(body.call_id, { outcome: body as ToolOutcome, at });
    answerWaiters.get(body.call_id)?.();
  });
  await tap.flush?.();
});
afterAll(async () => {
  await Promise.all(workers.map((w) => w.drain()));
  await Promise.all(buses.map((b) => b.close()));
});

describe(`cancel reaches a tool call wherever it waits (each at most ${BOUND_MS} ms)`, () => {
  it('a slow handler', { retry: 1, timeout: 30_000 }, async () => {
    await startWorker([napTool('cancel.nap')], { sharedOutcomes: false });
    const c = call('cancel.nap', { ms: 20_000 }, 'run-slow');
    const start = started(c);
    const pending = plannerCall(c, start.onProgress);
    await start.seen;
    const took = await cancelAndMeasure('run-slow', pending, c.call_id);
    expect(took.caller).toBeLessThanOrEqual(BOUND_MS);
    expect(took.worker).toBeLessThanOrEqual(BOUND_MS);
  });

  it(
    'a running piscina task and one queued behind it in the thread pool',
    { retry: 1, timeout: 30_000 },
    async () => {
      await startWorker([spinTool], { threads: 1, cpuQueueDepth: 1 });
      const running = call('cancel.spin', {}, 'run-cpu');
      const runningStart = started(running);
      const first = plannerCall(running, runningStart.onProgress);
      await runningStart.seen;
      const queued = call('cancel.spin', {}, 'run-cpu-queued');
      const queuedStart = started(queued);
      const second = plannerCall(queued, queuedStart.onProgress);
      await queuedStart.seen;
      const tookQueued = await cancelAndMeasure('run-cpu-queued', second, queued.call_id);
      const tookRunning = await cancelAndMeasure('run-cpu', first, running.call_id);
      expect(tookQueued.caller).toBeLessThanOrEqual(BOUND_MS);
      expect(tookQueued.worker).toBeLessThanOrEqual(BOUND_MS);
      expect(tookRunning.caller).toBeLessThanOrEqual(BOUND_MS);
      expect(tookRunning.worker).toBeLessThanOrEqual(BOUND_MS);
    },
  );

  it("another replica's idempotency claim", { retry: 1, timeout: 30_000 }, async () => {
    const a = await startWorker([napTool('cancel.once')], { concurrency: 1 });
    await startWorker([napTool('cancel.once')], { concurrency: 1 });
    const holder = call('cancel.once', { ms: 20_000 }, 'run-holder', { idempotency_key: 'shared-key' });
    const holderStart = started(holder);
    const held = plannerCall(holder, holderStart.onProgress);
    const holderWorker = (await holderStart.seen).worker_id;
    const waiting = call('cancel.once', { ms: 20_000 }, 'run-waiter', { idempotency_key: 'shared-key' });
    const waitingStart = started(waiting);
    const pending = plannerCall(waiting, waitingStart.onProgress);
    const waiter = await waitingStart.seen;
    expect(waiter.worker_id).not.toBe(holderWorker);
    expect(waiter.dedup).toBe('shared');
    const took = await cancelAndMeasure('run-waiter', pending, waiting.call_id);
    expect(took.caller).toBeLessThanOrEqual(BOUND_MS);
    expect(took.worker).toBeLessThanOrEqual(BOUND_MS);
    publishJson(caller, s.runCancel('run-holder'), {});
    expect((await held.settled).error).toMatchObject({ code: 'cancelled' });
    expect(a.workerId).toBeTruthy();
  });

  it(
    "the caller's own wait while every replica answers busy (admission refusal)",
    { retry: 1, timeout: 30_000 },
    async () => {
      await startWorker([napTool('cancel.full')], { concurrency: 1, sharedOutcomes: false });
      const holder = call('cancel.full', { ms: 20_000 }, 'run-full-holder');
      const holderStart = started(holder);
      const held = plannerCall(holder, holderStart.onProgress);
      await holderStart.seen;
      const refused = call('cancel.full', { ms: 1 }, 'run-refused');
      const pending = plannerCall(refused);
      let busyAnswers = 0;
      await new Promise<void>((resolve) => {
        const sub = caller.subscribe('_INBOX.>', (msg) => {
          if (msg.text().includes('"busy"') && ++busyAnswers >= 3) {
            void sub.drain();
            resolve();
          }
        });
      });
      const t0 = performance.now();
      publishJson(caller, s.runCancel('run-refused'), {});
      const result = await pending.settled;
      expect(result.error).toMatchObject({ code: 'cancelled', details: { call_id: refused.call_id } });
      expect(pending.settledAt() - t0).toBeLessThanOrEqual(BOUND_MS);
      publishJson(caller, s.runCancel('run-full-holder'), {});
      expect((await held.settled).error).toMatchObject({ code: 'cancelled' });
    },
  );
});
