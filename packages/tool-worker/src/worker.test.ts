import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  ArtifactFetchReplySchema,
  CatalogRegisterSchema,
  MemoryBus,
  ToolOutcomeSchema,
  invokeTool,
  publishJson,
  requestJson,
  respondError,
  serve,
  silentLogger,
  subjects,
  type Backend,
  type ToolOutcome,
  type ToolProgress,
} from '@agentmesh/protocol';
import { defineTool, type Tool } from './define-tool.js';
import { ToolWorker, type ToolWorkerOptions } from './worker.js';
import { mathCalcTool, regexMatchTool } from './packs/builtin/index.js';

const s = subjects();
const CPU_FIXTURE = new URL('../../../test/fixtures/worker-cpu-task.mjs', import.meta.url);

/** Waits for the `started` notice of a call: pass `onProgress` to invokeTool, await `seen`. */
function whenStarted() {
  let resolve!: (p: ToolProgress) => void;
  const seen = new Promise<ToolProgress>((r) => (resolve = r));
  return {
    seen,
    onProgress: (p: ToolProgress) => {
      if (p.kind === 'started') resolve(p);
    },
  };
}

/** Resolves once `subject` carried a message (delivered after the subscriptions made before it). */
function delivered(bus: Backend, subject: string): Promise<void> {
  return new Promise((resolve) => {
    const sub = bus.subscribe(subject, () => {
      void sub.drain();
      resolve();
    });
  });
}

function sleepTool(
  name = 'test.sleep',
  extra: { idempotent?: boolean; timeoutMs?: number; honourSignal?: boolean } = {},
) {
  return defineTool({
    name,
    description: 'Sleeps for ms milliseconds.',
    input: z.object({ ms: z.number().int().min(0), tag: z.string().optional() }),
    output: z.object({ slept: z.number(), tag: z.string().optional() }),
    idempotent: extra.idempotent ?? false,
    timeoutMs: extra.timeoutMs ?? 10_000,
    handler: async ({ ms, tag }, ctx) => {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(resolve, ms);
        if (extra.honourSignal !== false)
          ctx.signal.addEventListener('abort', () => {
            clearTimeout(timer);
            reject(ctx.signal.reason as Error);
          });
      });
      return { slept: ms, ...(tag === undefined ? {} : { tag }) };
    },
  });
}

const started: ToolWorker[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((w) => w.drain()));
});

async function startWorker(
  tools: Tool<any, any>[],
  options: Partial<ToolWorkerOptions> = {},
  bus: Backend = new MemoryBus(),
) {
  const worker = new ToolWorker({ bus, tools, logger: silentLogger(), register: false, ...options });
  await worker.start();
  started.push(worker);
  return { bus, worker };
}

let seq = 0;
const call = (tool: string, args: unknown, extra: Record<string, unknown> = {}) => ({
  call_id: `call-${++seq}`,
  run_id: 'run-1',
  tool,
  arguments: args,
  ...extra,
});

describe('ToolWorker on the in-process bus', () => {
  it('answers an outcome with its worker id and reports started, progress and heartbeats', async () => {
    const chatty = defineTool({
      name: 'test.chatty',
      description: 'Emits progress, then waits.',
      input: z.object({}),
      handler: async (_args, ctx) => {
        ctx.emit('halfway', { pct: 50 });
        await twoHeartbeats;
        return 'done';
      },
    });
    let heartbeatSeen!: () => void;
    const twoHeartbeats = new Promise<void>((r) => (heartbeatSeen = r));
    const { bus, worker } = await startWorker([chatty], { progressHeartbeatMs: 20 });
    const notices: ToolProgress[] = [];
    const outcome = await invokeTool(bus, call('test.chatty', {}), {
      onProgress: (p) => {
        notices.push(p);
        if (notices.filter((n) => n.kind === 'heartbeat').length >= 2) heartbeatSeen();
      },
    });
    expect(outcome).toMatchObject({
      is_error: false,
      output: 'done',
      preview: 'done',
      worker_id: worker.workerId,
      attempts: 1,
    });
    expect(notices[0]).toMatchObject({ kind: 'started', worker_id: worker.workerId, tool: 'test.chatty' });
    expect(notices.find((n) => n.kind === 'progress')).toMatchObject({
      message: 'halfway',
      data: { pct: 50 },
    });
    expect(notices.filter((n) => n.kind === 'heartbeat').length).toBeGreaterThanOrEqual(2);
  });

  it('still reports started (from the outcome) for a call answered within one turn of the worker', async () => {
    const { bus, worker } = await startWorker([
      defineTool({
        name: 'test.fast',
        description: 'Answers at once.',
        input: z.object({}),
        handler: () => 1,
      }),
    ]);
    const notices: ToolProgress[] = [];
    await invokeTool(bus, call('test.fast', {}), { onProgress: (p) => notices.push(p) });
    expect(notices).toEqual([
      { kind: 'started', call_id: `call-${seq}`, tool: 'test.fast', worker_id: worker.workerId },
    ]);
  });

  it('fails closed on invalid arguments, naming the field and keeping the call id; the handler never runs', async () => {
    let ran = 0;
    const tool = defineTool({
      name: 'test.count',
      description: 'Counts runs.',
      input: z.object({ n: z.number() }),
      handler: () => ++ran,
    });
    const { bus } = await startWorker([tool]);
    const c = call('test.count', { n: 'seven' });
    const outcome = await invokeTool(bus, c);
    expect(outcome).toMatchObject({
      is_error: true,
      call_id: c.call_id,
      error: { code: 'invalid_arguments', retryable: false },
    });
    expect(outcome.error?.message).toMatch(/n: must be number/);
    expect(outcome.error?.details?.['call_id']).toBe(c.call_id);
    expect(ran).toBe(0);
  });

  it('answers unknown tools: unknown_tool from the worker, no_responders (fast) for a tool nobody serves', async () => {
    const { bus, worker } = await startWorker([sleepTool()]);
    const direct = await worker.execute(call('test.missing', {}));
    expect(direct).toMatchObject({ is_error: true, attempts: 1, error: { code: 'unknown_tool' } });
    // an invocation of another tool on this tool's subject gets a valid outcome that names both tools
    const reply = await bus.request(
      'agentmesh.tool.invoke.test.sleep',
      JSON.stringify(call('test.other', {})),
    );
    const misrouted = ToolOutcomeSchema.parse(JSON.parse(reply.text()));
    expect(misrouted).toMatchObject({ is_error: true, attempts: 1, error: { code: 'unknown_tool' } });
    expect(misrouted.error?.message).toMatch(/"test\.other" arrived on the subject of "test\.sleep"/);
    const c = call('test.nobody', {});
    const error = await invokeTool(bus, c, { noRespondersMs: 100 }).catch((e: unknown) => e);
    expect(error).toMatchObject({
      code: 'no_responders',
      retryable: false,
      details: { call_id: c.call_id, tool: 'test.nobody' },
    });
  });

  it('frees its slot with every answer: an outcome, a failed handler, refused arguments, a malformed or misrouted invocation', async () => {
    const flaky = defineTool({
      name: 'test.flaky',
      description: 'Fails when asked to.',
      input: z.object({ fail: z.boolean() }),
      handler: ({ fail }) => {
        if (fail) throw new Error('asked to fail');
        return 'ok';
      },
    });
    const { bus, worker } = await startWorker([flaky], { concurrency: 1 });
    const subject = 'agentmesh.tool.invoke.test.flaky';
    const answers = [
      (await invokeTool(bus, call('test.flaky', { fail: false }))).is_error,
      (await invokeTool(bus, call('test.flaky', { fail: true }))).error?.code,
      (await invokeTool(bus, call('test.flaky', { fail: 'no' }))).error?.code,
      await requestJson(bus, subject, { call_id: 7 }, ToolOutcomeSchema).catch(
        (e: { code: string }) => e.code,
      ),
      (await requestJson(bus, subject, call('test.other', {}), ToolOutcomeSchema)).error?.code,
    ];
    expect(answers).toEqual([false, 'tool_error', 'invalid_arguments', 'invalid_message', 'unknown_tool']);
    expect(worker.inFlight).toBe(0);
    // one slot: a call that was never let go would keep this one waiting on busy until its deadline
    const last = await invokeTool(bus, call('test.flaky', { fail: false }), { timeoutMs: 2000 });
    expect(last).toMatchObject({ is_error: false, output: 'ok' });
  });

  it('times a call out per attempt, even when the handler ignores its signal', async () => {
    const { bus } = await startWorker([sleepTool('test.stuck', { timeoutMs: 60, honourSignal: false })]);
    const c = call('test.stuck', { ms: 2000 });
    const outcome = await invokeTool(bus, c);
    expect(outcome).toMatchObject({
      is_error: true,
      call_id: c.call_id,
      attempts: 1,
      error: { code: 'timeout' },
    });
    expect(outcome.error?.message).toMatch(/timed out after 60 ms/);
    expect(outcome.elapsed_ms).toBeLessThan(1500);
  });

  it('retries idempotent tools by policy (max_attempts counts all attempts), never non-idempotent ones', async () => {
    const failures = new Map<string, number>();
    const flaky = (name: string, idempotent: boolean, failTimes: number, maxAttempts = 4) =>
      defineTool({
        name,
        description: 'Fails a few times with a transient error.',
        input: z.object({}),
        idempotent,
        retry: { backoff_ms: 1, max_attempts: maxAttempts },
        handler: (_a, ctx) => {
          const n = (failures.get(ctx.callId) ?? 0) + 1;
          failures.set(ctx.callId, n);
          if (n <= failTimes) throw Object.assign(new Error('connection reset'), { code: 'ECONNRESET' });
          return { attempt: ctx.attempt };
        },
      });
    const permanent = defineTool({
      name: 'test.permanent',
      description: 'Always throws a permanent error.',
      input: z.object({}),
      idempotent: true,
      retry: { backoff_ms: 1 },
      handler: () => {
        throw new TypeError('x is not a function');
      },
    });
    const { bus } = await startWorker([
      flaky('test.flaky', true, 2),
      flaky('test.flaky_once', false, 1),
      flaky('test.always', true, 99, 3),
      permanent,
    ]);
    expect(await invokeTool(bus, call('test.flaky', {}))).toMatchObject({
      is_error: false,
      attempts: 3,
      output: { attempt: 3 },
    });
    expect(await invokeTool(bus, call('test.flaky_once', {}))).toMatchObject({
      is_error: true,
      attempts: 1,
      error: { code: 'tool_error', retryable: true },
    });
    expect(await invokeTool(bus, call('test.always', {}))).toMatchObject({ is_error: true, attempts: 3 });
    expect(await invokeTool(bus, call('test.permanent', {}))).toMatchObject({
      is_error: true,
      attempts: 1,
      error: { code: 'tool_error', retryable: false },
    });
  });

  it("aborts a run's calls on its cancel subject and leaves other runs alone", async () => {
    const { bus } = await startWorker([sleepTool()]);
    const doomedStart = whenStarted();
    const doomed = invokeTool(bus, call('test.sleep', { ms: 5000 }, { run_id: 'run-doomed' }), doomedStart);
    const other = invokeTool(bus, call('test.sleep', { ms: 150 }, { run_id: 'run-other' }));
    await doomedStart.seen;
    publishJson(bus, s.runCancel('run-doomed'), { reason: 'user pressed stop' });
    const outcome = await doomed;
    expect(outcome).toMatchObject({ is_error: true, error: { code: 'cancelled', retryable: false } });
    expect(outcome.error?.message).toMatch(/run-doomed: user pressed stop/);
    expect(await other).toMatchObject({ is_error: false, output: { slept: 150 } });
  });

  it('does not start a call whose run was cancelled before it arrived', async () => {
    let ran = false;
    const tool = defineTool({
      name: 'test.late',
      description: 'Records whether it ran.',
      input: z.object({}),
      handler: () => (ran = true),
    });
    const { bus } = await startWorker([tool]);
    const cancelled = delivered(bus, s.runCancel('run-gone'));
    publishJson(bus, s.runCancel('run-gone'), {});
    await cancelled;
    const outcome = await invokeTool(bus, call('test.late', {}, { run_id: 'run-gone' }));
    expect(outcome).toMatchObject({ is_error: true, error: { code: 'cancelled' } });
    expect(ran).toBe(false);
  });

  it('answers an idempotent handler that returns at once in the turn its invocation arrives; throws and thenables as before', async () => {
    let tries = 0;
    // which replies the worker sent while the bus was still delivering an invocation to it
    const bus = new MemoryBus();
    let delivering = false;
    const inTurn: boolean[] = [];
    const backend = bus as unknown as Record<'respond' | 'respondValue', (...a: unknown[]) => unknown>;
    for (const name of ['respond', 'respondValue'] as const) {
      const f = backend[name].bind(bus);
      backend[name] = (...a: unknown[]) => (inTurn.push(delivering), f(...a));
    }
    const subscribe = bus.subscribe.bind(bus);
    bus.subscribe = (subject, handler, options) =>
      subscribe(
        subject,
        (msg) => {
          delivering = true;
          try {
            return handler(msg);
          } finally {
            delivering = false;
          }
        },
        options,
      );
    await startWorker(
      [
        defineTool({
          name: 'test.now',
          description: 'Answers at once.',
          input: z.object({}),
          idempotent: true,
          handler: () => ({ n: 1 }),
        }),
        defineTool({
          name: 'test.flaky_now',
          description: 'Throws at once the first time.',
          input: z.object({}),
          idempotent: true,
          retry: { backoff_ms: 1, max_attempts: 2 },
          handler: () => {
            if (++tries === 1) throw Object.assign(new Error('reset'), { code: 'ECONNRESET' });
            return { tries };
          },
        }),
        defineTool({
          name: 'test.thenable',
          description: 'Returns a thenable.',
          input: z.object({}),
          handler: () => ({ then: (resolve: (v: unknown) => void) => resolve({ adopted: true }) }),
        }),
      ],
      {},
      bus,
    );
    expect(await invokeTool(bus, call('test.now', {}))).toMatchObject({ is_error: false, output: { n: 1 } });
    expect(inTurn).toEqual([true]);
    expect(await invokeTool(bus, call('test.flaky_now', {}))).toMatchObject({
      is_error: false,
      attempts: 2,
      output: { tries: 2 },
    });
    expect(await invokeTool(bus, call('test.thenable', {}))).toMatchObject({
      is_error: false,
      output: { adopted: true },
    });
  });

  it('sends started for an idempotent call that goes on past its turn, and none for one answered in it', async () => {
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const { bus } = await startWorker([
      defineTool({
        name: 'test.later',
        description: 'Answers once released.',
        input: z.object({}),
        idempotent: true,
        handler: async () => {
          await released;
          return { ok: true };
        },
      }),
      defineTool({
        name: 'test.at_once',
        description: 'Answers at once.',
        input: z.object({}),
        idempotent: true,
        handler: () => ({ ok: true }),
      }),
    ]);
    const fromWorker: string[] = [];
    const watch = bus.subscribe('_INBOX.>', (msg) => {
      const body = JSON.parse(msg.text()) as { kind?: string; call_id?: string };
      if (body.kind !== undefined) fromWorker.push(`${body.kind} ${body.call_id}`);
    });
    const started = whenStarted();
    const later = call('test.later', {});
    const pending = invokeTool(bus, later, started);
    await started.seen;
    release();
    expect(await pending).toMatchObject({ is_error: false });
    const atOnce = call('test.at_once', {});
    await invokeTool(bus, atOnce);
    await new Promise((r) => setImmediate(r));
    watch.unsubscribe();
    expect(fromWorker).toEqual([`started ${later.call_id}`]);
  }, 10_000);

  it('reports output that cannot be JSON as invalid_output', async () => {
    const big = defineTool({
      name: 'test.bigint',
      description: 'Returns a bigint.',
      input: z.object({}),
      handler: () => ({ n: 1n }) as never,
    });
    const { bus } = await startWorker([big]);
    expect(await invokeTool(bus, call('test.bigint', {}))).toMatchObject({
      is_error: true,
      error: { code: 'invalid_output', message: expect.stringMatching(/not JSON/) },
    });
  });

  it('reports output that breaks its schema as invalid_output with the call id', async () => {
    const liar = defineTool({
      name: 'test.liar',
      description: 'Breaks its output schema.',
      input: z.object({}),
      output: z.object({ ok: z.boolean() }),
      idempotent: true,
      handler: () => ({ ok: 'yes' }) as never,
    });
    const { bus } = await startWorker([liar]);
    const c = call('test.liar', {});
    const outcome = await invokeTool(bus, c);
    expect(outcome).toMatchObject({
      is_error: true,
      attempts: 1,
      error: { code: 'invalid_output', details: { call_id: c.call_id } },
    });
    expect(outcome.error?.message).toMatch(/ok: /);
  });

  it('moves big outputs to tenant-scoped artifacts with a preview, and serves artifact_fetch', async () => {
    const big = defineTool({
      name: 'test.big',
      description: 'Returns n bytes of text.',
      input: z.object({ n: z.number().int() }),
      handler: ({ n }) => 'abcdefghij'.repeat(Math.ceil(n / 10)).slice(0, n),
    });
    const { bus } = await startWorker([big]);
    const outcome = await invokeTool(bus, call('test.big', { n: 100_000 }, { identity: { tenant: 'acme' } }));
    expect(outcome.is_error).toBe(false);
    expect(outcome.output).toBeUndefined();
    expect(outcome.artifact).toMatchObject({ size: 100_000, mime: 'text/plain; charset=utf-8' });
    expect(Buffer.byteLength(outcome.preview)).toBeLessThanOrEqual(4096);
    expect(outcome.preview).toMatch(/^abcdefghij/);
    expect(outcome.preview).toContain(`artifact ${outcome.artifact!.ref}`);
    const ref = outcome.artifact!.ref;
    const first = await requestJson(
      bus,
      s.artifactFetch,
      { ref, max_bytes: 10, identity: { tenant: 'acme' } },
      ArtifactFetchReplySchema,
    );
    expect(first).toMatchObject({ text: 'abcdefghij', offset: 0, size: 100_000, eof: false });
    const last = await requestJson(
      bus,
      s.artifactFetch,
      { ref, offset: 99_995, identity: { tenant: 'acme' } },
      ArtifactFetchReplySchema,
    );
    expect(last).toMatchObject({ text: 'fghij', eof: true });
    await expect(
      requestJson(bus, s.artifactFetch, { ref, identity: { tenant: 'intruder' } }, ArtifactFetchReplySchema),
    ).rejects.toMatchObject({ code: 'not_found' });
  });

  it('caps what reaches the model at max_output_bytes with a visible notice', async () => {
    const medium = defineTool({
      name: 'test.medium',
      description: 'Returns 2000 bytes.',
      input: z.object({}),
      handler: () => 'y'.repeat(2000),
    });
    const { bus } = await startWorker([medium]);
    const outcome = await invokeTool(bus, call('test.medium', {}, { max_output_bytes: 512 }));
    expect(Buffer.byteLength(outcome.preview)).toBeLessThanOrEqual(512);
    expect(outcome.preview).toMatch(/\[output truncated: \d+ of 2000 bytes shown/);
    expect(outcome.artifact?.size).toBe(2000);
  });

  it('replays the first outcome for a repeated idempotency key, and runs concurrent duplicates once', async () => {
    let runs = 0;
    const counted = defineTool({
      name: 'test.counted',
      description: 'Counts its runs.',
      input: z.object({}),
      handler: async () => {
        await gate;
        return ++runs;
      },
    });
    let gate: Promise<void> = Promise.resolve();
    const { bus } = await startWorker([counted]);
    const first = await invokeTool(bus, call('test.counted', {}, { idempotency_key: 'k1' }));
    const again = await invokeTool(bus, call('test.counted', {}, { idempotency_key: 'k1' }));
    expect(first.output).toBe(1);
    expect(again).toMatchObject({ output: 1, replayed: true });
    let open!: () => void;
    gate = new Promise<void>((r) => (open = r));
    const firstStart = whenStarted();
    const dupStart = whenStarted();
    const pending = [
      invokeTool(bus, call('test.counted', {}, { idempotency_key: 'k2' }), firstStart),
      invokeTool(bus, call('test.counted', {}, { idempotency_key: 'k2' }), dupStart),
    ];
    await Promise.all([firstStart.seen, dupStart.seen]);
    open();
    const both = await Promise.all(pending);
    expect(both.map((o) => o.output)).toEqual([2, 2]);
    expect(runs).toBe(2);
  });

  it('runs a non-idempotent call again under a fresh idempotency key, never replaying the first error', async () => {
    let runs = 0;
    const flaky = defineTool({
      name: 'test.flaky_charge',
      description: 'Fails on its first run (not idempotent).',
      input: z.object({}),
      handler: () => {
        if (++runs === 1) throw new Error('gateway hiccup');
        return runs;
      },
    });
    const { bus } = await startWorker([flaky]);
    const base = call('test.flaky_charge', {});
    const first = await invokeTool(bus, { ...base, idempotency_key: 'r:1' });
    const sameKey = await invokeTool(bus, { ...base, idempotency_key: 'r:1' });
    const freshKey = await invokeTool(bus, { ...base, idempotency_key: 'r:2', attempt: 2 });
    expect(first).toMatchObject({ is_error: true, error: { code: 'tool_error' } });
    expect(sameKey).toMatchObject({ is_error: true, replayed: true });
    expect(freshKey).toMatchObject({ is_error: false, output: 2 });
    expect(freshKey.replayed).toBeUndefined();
    expect(runs).toBe(2);
  });

  it('runs an idempotent tool again for a repeated idempotency key: only non-idempotent outcomes are kept', async () => {
    let runs = 0;
    const counted = defineTool({
      name: 'test.counted_idempotent',
      description: 'Counts its runs.',
      input: z.object({}),
      idempotent: true,
      handler: () => ++runs,
    });
    const { bus } = await startWorker([counted]);
    const first = await invokeTool(bus, call('test.counted_idempotent', {}, { idempotency_key: 'k1' }));
    const again = await invokeTool(bus, call('test.counted_idempotent', {}, { idempotency_key: 'k1' }));
    expect([first.output, again.output]).toEqual([1, 2]);
    expect(again.replayed).toBeUndefined();
  });

  it("checks an invocation without copying it and leaves the caller's object as it was", async () => {
    const { bus } = await startWorker([mathCalcTool()]);
    const invocation = call('math.calc', { lhs: 2, rhs: 3, op: 'add' });
    const before = structuredClone(invocation);
    const outcome = await invokeTool(bus, invocation);
    expect(outcome).toMatchObject({ is_error: false, output: { result: 5 } });
    expect(invocation).toEqual(before);
    for (const bad of [{ identity: null }, { attempt: 0 }, { surprise: 1 }, { tool: 'Not A Name' }])
      await expect(invokeTool(bus, { ...call('math.calc', {}), ...bad } as never)).rejects.toMatchObject({
        code: 'invalid_request',
        message: expect.stringMatching(/invalid tool invocation/),
      });
  });

  it('shares no object between a caller and a handler: arguments, outputs and replayed outcomes', async () => {
    const kept: { nested: unknown[]; outputs: { items: number[] }[] } = { nested: [], outputs: [] };
    const keeper = (name: string, idempotent: boolean) =>
      defineTool({
        name,
        description: 'Keeps what it got and what it gave.',
        input: z.object({ nested: z.unknown() }),
        idempotent,
        handler: ({ nested }) => {
          kept.nested.push(nested);
          const output = { items: [1, 2] };
          kept.outputs.push(output);
          return output;
        },
      });
    const { bus } = await startWorker([keeper('test.keeper', true), keeper('test.keeper_once', false)]);
    const nested = { deep: [1] };
    const fresh = await invokeTool(bus, call('test.keeper', { nested }));
    expect(kept.nested[0]).toEqual(nested);
    expect(kept.nested[0]).not.toBe(nested);
    kept.outputs[0]!.items.push(3);
    expect(fresh.output).toEqual({ items: [1, 2] });
    const once = call('test.keeper_once', { nested }, { idempotency_key: 'keep-1' });
    const first = await invokeTool(bus, once);
    (first.output as { items: number[] }).items.push(4);
    const replay = await invokeTool(bus, once);
    expect(replay).toMatchObject({ replayed: true, output: { items: [1, 2] } });
    expect(kept.outputs).toHaveLength(2);
  });

  it('checks an outcome handed over by anything but a worker', async () => {
    const bus = new MemoryBus();
    bus.subscribe('agentmesh.tool.invoke.test.fake', (msg) => void bus.respondValue(msg, { call_id: 'x' }), {
      queue: 'tool.test.fake',
    });
    await expect(invokeTool(bus, call('test.fake', {}))).rejects.toMatchObject({
      code: 'invalid_message',
      message: expect.stringMatching(/invalid outcome of test.fake/),
    });
    await bus.close();
  });

  it('checks an invocation handed over by anything but a first send of invokeTool', async () => {
    const { bus } = await startWorker([mathCalcTool()]);
    const forged = { ...call('math.calc', { lhs: 2, rhs: 3, op: 'add' }), identity: { tenant: 5 } };
    const reply = await bus.requestValue!(s.toolInvoke('math.calc'), forged);
    expect(reply.headers?.['am-status']).toBe('error');
    expect(JSON.parse(reply.text())).toMatchObject({
      error: { code: 'invalid_message', message: expect.stringMatching(/identity/) },
    });
  });

  it('checks a re-sent invocation again: the caller may have changed it since its first send', async () => {
    const { bus } = await startWorker([sleepTool()], { concurrency: 1 });
    const firstStart = whenStarted();
    const first = invokeTool(bus, call('test.sleep', { ms: 50 }), firstStart);
    await firstStart.seen;
    const second = call('test.sleep', { ms: 1 });
    // turned away busy, it is sent again once the first call frees the worker, after this change
    const resent = invokeTool(bus, second);
    (second as Record<string, unknown>)['identity'] = { tenant: 5 };
    await expect(resent).rejects.toMatchObject({ code: 'invalid_message' });
    expect(await first).toMatchObject({ is_error: false });
  });

  it('sends what JSON would change, or what may be too large to hand over, as JSON text', async () => {
    const echo = defineTool({
      name: 'test.echo_at',
      description: 'Echoes a time.',
      input: z.object({ at: z.string() }),
      idempotent: true,
      handler: ({ at }) => ({ at: at.slice(0, 24), when: new Date(0) }),
    });
    const { bus } = await startWorker([echo], {}, new MemoryBus({ maxPayload: 4096 }));
    const epoch = new Date(0).toISOString();
    const dated = await invokeTool(bus, call('test.echo_at', { at: new Date(0) }));
    expect(dated).toMatchObject({ is_error: false, output: { at: epoch, when: epoch } });
    // 6 bytes a character is the bound a value is handed over under: this one goes as its 1 KiB of text
    const long = await invokeTool(bus, call('test.echo_at', { at: 'x'.repeat(1000) }));
    expect(long).toMatchObject({ is_error: false, output: { at: 'x'.repeat(24) } });
    await expect(invokeTool(bus, call('test.echo_at', { at: 'x'.repeat(5000) }))).rejects.toMatchObject({
      code: 'payload_too_large',
    });
  });

  it('answers busy at once when full, and the client retries until a slot frees', async () => {
    const { bus, worker } = await startWorker([sleepTool()], { concurrency: 1 });
    const firstStart = whenStarted();
    const first = invokeTool(bus, call('test.sleep', { ms: 100 }), firstStart);
    await firstStart.seen;
    const raw = await bus.request(s.toolInvoke('test.sleep'), JSON.stringify(call('test.sleep', { ms: 1 })));
    expect(raw.headers?.['am-status']).toBe('error');
    expect(JSON.parse(raw.text())).toMatchObject({
      error: { code: 'busy', retryable: true, details: { worker_id: worker.workerId } },
    });
    const outcomes = await Promise.all([
      first,
      invokeTool(bus, call('test.sleep', { ms: 5 })),
      invokeTool(bus, call('test.sleep', { ms: 5 })),
    ]);
    expect(outcomes.every((o) => !o.is_error)).toBe(true);
  });

  it('answers busy for CPU calls once its threads and CPU queue are full, and the client gets through', async () => {
    const hash = defineTool({
      name: 'test.hash',
      description: 'Hashes on a thread.',
      input: z.object({ rounds: z.number(), bytes: z.number(), seed: z.string().optional() }),
      cpu: { module: CPU_FIXTURE, export: 'hashRounds' },
    });
    const { bus } = await startWorker([hash], { threads: 1, cpuQueueDepth: 0 });
    const firstStart = whenStarted();
    const first = invokeTool(bus, call('test.hash', { rounds: 200, bytes: 65_536 }), firstStart);
    await firstStart.seen;
    const raw = await bus.request(
      s.toolInvoke('test.hash'),
      JSON.stringify(call('test.hash', { rounds: 1, bytes: 1 })),
    );
    expect(JSON.parse(raw.text())).toMatchObject({
      error: { code: 'busy', message: expect.stringMatching(/CPU threads busy/) },
    });
    const rest = await Promise.all(
      Array.from({ length: 3 }, (_, i) =>
        invokeTool(bus, call('test.hash', { rounds: 5, bytes: 64, seed: String(i) })),
      ),
    );
    expect([await first, ...rest].every((o) => !o.is_error)).toBe(true);
  });

  it('queues a CPU call sent to it by name beyond its full queue, and names its own subject only while it would', async () => {
    const hash = defineTool({
      name: 'test.hash',
      description: 'Hashes on a thread.',
      input: z.object({ rounds: z.number(), bytes: z.number(), seed: z.string().optional() }),
      cpu: { module: CPU_FIXTURE, export: 'hashRounds' },
    });
    // 1 thread, no queue: a named overflow of 1
    const { bus, worker } = await startWorker([hash], { threads: 1, cpuQueueDepth: 0 });
    const firstStart = whenStarted();
    const first = invokeTool(bus, call('test.hash', { rounds: 400, bytes: 65_536 }), firstStart);
    await firstStart.seen;
    const busy = JSON.parse(
      (
        await bus.request(
          s.toolInvoke('test.hash'),
          JSON.stringify(call('test.hash', { rounds: 1, bytes: 1 })),
        )
      ).text(),
    ) as { error: { code: string; details: { invoke?: string } } };
    expect(busy.error).toMatchObject({ code: 'busy', details: { worker_id: worker.workerId, offers: true } });
    const invoke = busy.error.details.invoke!;
    expect(invoke.startsWith(`${s.toolInvoke('test.hash')}.W`)).toBe(true);
    // sent by name, the call waits for the thread; a second one finds the overflow full and is not named again
    const named = bus.request(invoke, JSON.stringify(call('test.hash', { rounds: 1, bytes: 1 })));
    const refused = JSON.parse(
      (await bus.request(invoke, JSON.stringify(call('test.hash', { rounds: 1, bytes: 1 })))).text(),
    ) as { error: { code: string; details: Record<string, unknown> } };
    expect(refused.error.code).toBe('busy');
    expect(refused.error.details['invoke']).toBeUndefined();
    expect(worker.cpuThreads).toBeLessThanOrEqual(1);
    const outcome = JSON.parse((await named).text()) as ToolOutcome;
    expect(outcome).toMatchObject({ is_error: false, worker_id: worker.workerId });
    expect((await first).is_error).toBe(false);
  });

  it('stops a runaway CPU handler and a runaway regex on their threads; the pool stays healthy', async () => {
    const spin = defineTool({
      name: 'test.spin',
      description: 'Spins forever on a thread.',
      input: z.object({}),
      timeoutMs: 150,
      retry: { max_attempts: 1 },
      cpu: { module: CPU_FIXTURE, export: 'spin' },
    });
    const hash = defineTool({
      name: 'test.hash',
      description: 'Hashes on a thread.',
      input: z.object({ rounds: z.number(), bytes: z.number(), seed: z.string().optional() }),
      cpu: { module: CPU_FIXTURE, export: 'hashRounds' },
    });
    const { bus, worker } = await startWorker([spin, hash, regexMatchTool()], { threads: 2 });
    const [spun, regex] = await Promise.all([
      invokeTool(bus, call('test.spin', {})),
      invokeTool(
        bus,
        call('regex.match', { pattern: '(a+)+$', text: `${'a'.repeat(40)}b` }, { timeout_ms: 200 }),
      ),
    ]);
    expect(spun).toMatchObject({ is_error: true, error: { code: 'timeout' } });
    expect(regex).toMatchObject({ is_error: true, error: { code: 'timeout' } });
    const spinStart = whenStarted();
    const cancelled = invokeTool(
      bus,
      call('test.spin', {}, { run_id: 'run-spin', timeout_ms: 5000 }),
      spinStart,
    );
    await spinStart.seen;
    publishJson(bus, s.runCancel('run-spin'), {});
    expect(await cancelled).toMatchObject({ is_error: true, error: { code: 'cancelled' } });
    const healthy = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        invokeTool(bus, call('test.hash', { rounds: 10, bytes: 64, seed: String(i) })),
      ),
    );
    expect(healthy.every((o) => !o.is_error)).toBe(true);
    expect(new Set(healthy.map((o) => (o.output as { hex: string }).hex)).size).toBe(6);
    expect(await invokeTool(bus, call('regex.match', { pattern: 'b+', text: 'abbc' }))).toMatchObject({
      is_error: false,
      output: { count: 1, matches: [{ match: 'bb', index: 1 }] },
    });
    expect(worker.cpuThreads).toBeLessThanOrEqual(2);
  });

  it('registers with the catalog once one answers, re-registers when forgotten, deregisters on drain', async () => {
    const bus = new MemoryBus();
    let refusedOnce!: () => void;
    const refused = new Promise<void>((r) => (refusedOnce = r));
    const notYet = bus.subscribe(s.catalogRegister, (msg) => {
      respondError(bus, msg, { code: 'unavailable', message: 'catalog starting', retryable: true });
      refusedOnce();
    });
    const { worker } = await startWorker([sleepTool()], { register: true, heartbeatMs: 50 }, bus);
    await refused;
    await notYet.drain();
    let registeredAgain!: () => void;
    const secondRegister = new Promise<void>((r) => (registeredAgain = r));
    const registers: unknown[] = [];
    const deregisters: unknown[] = [];
    let heartbeats = 0;
    serve({
      bus,
      subject: s.catalogRegister,
      schema: CatalogRegisterSchema,
      what: 'register',
      handler: (body) => {
        if (registers.push(body) === 2) registeredAgain();
        return { accepted: body.tools.map((t) => t.name), rejected: [], ttl_ms: body.ttl_ms ?? 0 };
      },
    });
    bus.subscribe(s.catalogHeartbeat, (msg) => {
      heartbeats++;
      bus.respond(msg, JSON.stringify({ known: heartbeats !== 2 }));
    });
    bus.subscribe(s.catalogDeregister, (msg) => {
      deregisters.push(JSON.parse(msg.text()));
      bus.respond(msg, JSON.stringify({ ok: true }));
    });
    const reply = await worker.whenRegistered();
    expect(reply.accepted).toEqual(['test.sleep']);
    expect(registers[0]).toMatchObject({
      worker_id: worker.workerId,
      ttl_ms: 150,
      tools: [{ name: 'test.sleep' }],
    });
    await secondRegister;
    await worker.drain();
    expect(deregisters).toEqual([{ worker_id: worker.workerId }]);
  });

  it('drain lets calls in flight finish and then stops taking calls', async () => {
    const { bus, worker } = await startWorker([sleepTool()]);
    const inFlightStart = whenStarted();
    const inFlight = invokeTool(bus, call('test.sleep', { ms: 150 }), inFlightStart);
    await inFlightStart.seen;
    const drained = worker.drain();
    expect(await inFlight).toMatchObject({ is_error: false, output: { slept: 150 } });
    await drained;
    await expect(
      invokeTool(bus, call('test.sleep', { ms: 1 }), { noRespondersMs: 50 }),
    ).rejects.toMatchObject({
      code: 'no_responders',
    });
  });
});
