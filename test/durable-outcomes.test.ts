/**
 * Issue 8, the workers' side on a real nats-server: outcomes of non-idempotent calls are shared by all replicas
 * (KV `<prefix>_tool_outcomes`), so a call re-sent with the same idempotency key to another replica answers the
 * first outcome, waits for it while the first replica still runs the call, and is refused as "may have run"
 * (`worker_lost`, not retryable) when the first replica stopped without an outcome.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { z } from 'zod';
import { ErrorCode, NatsBus, encodeJson, invokeTool, silentLogger } from '@agentmesh/protocol';
import { SharedOutcomes, ToolWorker, defineTool, toolOutcomesBucket } from '@agentmesh/tool-worker';
import { uniquePrefix } from './fixtures/llm/nats.js';

const natsUrl = inject('natsUrl');
const prefix = uniquePrefix('do');
const executions = new Map<string, number>();
const runningNow = new Map<string, () => void>();
/** Resolves once the handler runs the call `callId`. */
const handlerStarted = (callId: string) => new Promise<void>((resolve) => runningNow.set(callId, resolve));
const buses: NatsBus[] = [];
const workers: ToolWorker[] = [];

const charge = defineTool({
  name: 'billing.charge',
  description: 'Charges an amount (not idempotent).',
  input: z.object({ amount: z.number(), ms: z.number().int().min(0).default(0) }),
  output: z.object({ charged: z.number(), worker_id: z.string() }),
  idempotent: false,
  handler: async ({ amount, ms }, ctx) => {
    executions.set(ctx.callId, (executions.get(ctx.callId) ?? 0) + 1);
    runningNow.get(ctx.callId)?.();
    if (ms > 0) await new Promise((r) => setTimeout(r, ms));
    return { charged: amount, worker_id: ctx.workerId };
  },
});

/** Fails the first time it runs for a call id, succeeds after: a non-idempotent tool with a transient fault. */
const flakyRuns = new Map<string, number>();
const flaky = defineTool({
  name: 'billing.flaky',
  description: 'Charges an amount; fails on its first run for each call (not idempotent).',
  input: z.object({ amount: z.number() }),
  idempotent: false,
  handler: ({ amount }, ctx) => {
    const runs = (flakyRuns.get(ctx.callId) ?? 0) + 1;
    flakyRuns.set(ctx.callId, runs);
    if (runs === 1) throw new Error('card network hiccup');
    return { charged: amount, worker_id: ctx.workerId };
  },
});

async function startWorker(id: string): Promise<ToolWorker> {
  const bus = await NatsBus.connect(natsUrl);
  buses.push(bus);
  const worker = new ToolWorker({
    bus,
    prefix,
    tools: [charge, flaky],
    workerId: id,
    register: false,
    logger: silentLogger(),
    sharedOutcomes: { claimStaleMs: 1_000 },
  });
  await worker.start();
  workers.push(worker);
  return worker;
}

const call = (callId: string, ms = 0) => ({
  call_id: callId,
  tool: 'billing.charge',
  arguments: { amount: 5, ms },
  run_id: 'run-1',
  idempotency_key: `run-1:1:${callId}`,
});

let a: ToolWorker;
let b: ToolWorker;

beforeAll(async () => {
  a = await startWorker('worker-a');
  b = await startWorker('worker-b');
});

afterAll(async () => {
  for (const w of workers) await w.drain();
  const jsm = await buses[0]!.jetstreamManager();
  await jsm.streams.delete(`KV_${toolOutcomesBucket(prefix)}`).catch(() => undefined);
  for (const bus of buses) await bus.close();
});

describe('shared outcomes of non-idempotent calls', () => {
  it('a call re-sent to another replica answers the first outcome', async () => {
    const first = await a.execute(call('c1'));
    const again = await b.execute(call('c1'));
    expect(first).toMatchObject({ is_error: false, output: { charged: 5, worker_id: 'worker-a' } });
    expect(again).toMatchObject({ is_error: false, replayed: true, output: { worker_id: 'worker-a' } });
    expect(executions.get('c1')).toBe(1);
  });

  it('a call re-sent while the first replica still runs it waits for that outcome', async () => {
    const running = handlerStarted('c2');
    const first = a.execute(call('c2', 1_500));
    await running;
    const second = await b.execute(call('c2', 1_500));
    expect(second).toMatchObject({ is_error: false, replayed: true, output: { worker_id: 'worker-a' } });
    expect(await first).toMatchObject({ is_error: false });
    expect(executions.get('c2')).toBe(1);
  });

  it('a call whose first worker stopped without an outcome is refused as "may have run", never run again', async () => {
    const kv = await buses[0]!.kv(toolOutcomesBucket(prefix));
    const key = SharedOutcomes.keyOf('default', 'billing.charge', 'run-1:1:c3');
    await kv.put(
      key,
      encodeJson({ state: 'claimed', worker_id: 'worker-dead', heartbeat_at: Date.now() - 60_000 }),
    );
    const outcome = await b.execute(call('c3'));
    expect(outcome).toMatchObject({
      is_error: true,
      error: { code: ErrorCode.WorkerLost, retryable: false },
    });
    expect(outcome.error?.message).toMatch(/worker-dead.*may have run/);
    expect(executions.get('c3')).toBeUndefined();
  });

  it('a retry under a fresh idempotency key runs again; only the same key replays the recorded error', async () => {
    const caller = buses[0]!;
    const base = { call_id: 'f1', run_id: 'run-f', tool: 'billing.flaky', arguments: { amount: 7 } };
    const first = await invokeTool(caller, { ...base, idempotency_key: 'run-f:f1:1' }, { prefix });
    expect(first).toMatchObject({ is_error: true, error: { code: ErrorCode.ToolError }, dedup: 'shared' });
    expect(first.replayed).toBeUndefined();
    const sameKey = await invokeTool(caller, { ...base, idempotency_key: 'run-f:f1:1' }, { prefix });
    expect(sameKey).toMatchObject({
      is_error: true,
      replayed: true,
      error: { message: first.error!.message },
    });
    expect(flakyRuns.get('f1')).toBe(1);
    const retried = await invokeTool(
      caller,
      { ...base, idempotency_key: 'run-f:f1:2', attempt: 2 },
      { prefix },
    );
    expect(retried).toMatchObject({ is_error: false, output: { charged: 7 } });
    expect(retried.replayed).toBeUndefined();
    expect(flakyRuns.get('f1')).toBe(2);
  });
});
