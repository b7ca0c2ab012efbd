import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { z } from 'zod';
import {
  ArtifactFetchReplySchema,
  CatalogRegisterSchema,
  NatsBus,
  connectBus,
  invokeTool,
  publishJson,
  requestJson,
  serve,
  silentLogger,
  subjects,
  type Backend,
} from '@agentmesh/protocol';
import { ToolWorker, builtinTools, defineTool, type Tool } from '@agentmesh/tool-worker';

const natsUrl = inject('natsUrl');
const prefix = `wn${process.pid}x${Date.now().toString(36)}`;
const s = subjects(prefix);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const sleepTool = defineTool({
  name: 'test.nap',
  description: 'Sleeps, honouring its signal.',
  input: z.object({ ms: z.number() }),
  handler: async ({ ms }, ctx) => {
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(resolve, ms);
      ctx.signal.addEventListener('abort', () => {
        clearTimeout(t);
        reject(ctx.signal.reason as Error);
      });
    });
    return { ms, worker: ctx.workerId };
  },
});
const bigTool = defineTool({
  name: 'test.big',
  description: 'Returns n bytes of JSON.',
  input: z.object({ n: z.number().int() }),
  output: z.object({ blob: z.string() }),
  handler: ({ n }) => ({ blob: 'q'.repeat(n) }),
});

let bus: Backend;
const workers: ToolWorker[] = [];
async function startWorker(tools: Tool<any, any>[], concurrency = 64) {
  const w = new ToolWorker({ bus, tools, prefix, logger: silentLogger(), register: false, concurrency });
  await w.start();
  workers.push(w);
  return w;
}
let seq = 0;
const call = (tool: string, args: unknown, extra: Record<string, unknown> = {}) => ({
  call_id: `n-${++seq}`,
  run_id: 'run-n',
  tool,
  arguments: args,
  ...extra,
});

beforeAll(async () => {
  bus = await connectBus({ natsUrl });
  await startWorker([...builtinTools(), sleepTool, bigTool]);
});
afterAll(async () => {
  await Promise.all(workers.map((w) => w.drain()));
  await bus.close();
});

describe('ToolWorker over NATS', () => {
  it('serves 100 concurrent builtin calls with distinct inputs over NATS', async () => {
    const ids = Array.from({ length: 100 }, (_, i) => i);
    const outcomes = await Promise.all(
      ids.map((i) =>
        i % 2 === 0
          ? invokeTool(bus, call('crypto.sha256', { text: `n${i}` }), { prefix })
          : invokeTool(bus, call('math.calc', { lhs: i, rhs: i, op: 'mul' }), { prefix }),
      ),
    );
    ids.forEach((i) =>
      expect(outcomes[i]!.output).toEqual(
        i % 2 === 0 ? { hex: createHash('sha256').update(`n${i}`).digest('hex') } : { result: i * i },
      ),
    );
  });

  it('refuses a payload above the NATS limit with payload_too_large and the call id', async () => {
    const c = call('crypto.sha256', { text: 'x'.repeat((bus as NatsBus).maxPayload + 10) });
    await expect(invokeTool(bus, c, { prefix })).rejects.toMatchObject({
      code: 'payload_too_large',
      retryable: false,
      details: { call_id: c.call_id, tool: 'crypto.sha256' },
    });
  });

  it('answers no_responders naming the call for a tool no worker serves', async () => {
    const c = call('nobody.serves_this', {});
    await expect(invokeTool(bus, c, { prefix, noRespondersMs: 200 })).rejects.toMatchObject({
      code: 'no_responders',
      details: { call_id: c.call_id },
    });
  });

  it('refuses a hostile reply as invalid_message naming the tool, and a late outcome does not reach the next call', async () => {
    // a fake "worker" on a tool of its own: the first call gets text that is not JSON, the second an object that is no
    // outcome, the third nothing until it timed out (then its outcome, late), the fourth its outcome
    const tool = 'test.hostile_replier';
    const held: { reply: () => void }[] = [];
    let n = 0;
    const sub = bus.subscribe(
      s.toolInvoke(tool),
      (msg) => {
        const body = JSON.parse(msg.text()) as { call_id: string };
        const k = ++n;
        const outcome = JSON.stringify({
          call_id: body.call_id,
          tool,
          worker_id: 'fake',
          is_error: false,
          output: { n: k },
          preview: '{}',
          elapsed_ms: 0,
          attempts: 1,
        });
        if (k === 1) bus.respond(msg, '{"call_id": ');
        else if (k === 2) bus.respond(msg, JSON.stringify({ call_id: body.call_id, output: 'x' }));
        else if (k === 3) held.push({ reply: () => bus.respond(msg, outcome) });
        else {
          held.shift()?.reply();
          bus.respond(msg, outcome);
        }
      },
      { queue: `tool.${tool}` },
    );
    await bus.flush();
    const options = { prefix, lostAfterMs: 60_000 };
    await expect(invokeTool(bus, call(tool, {}), options)).rejects.toMatchObject({
      code: 'invalid_message',
      message: expect.stringMatching(/not valid JSON/),
    });
    await expect(invokeTool(bus, call(tool, {}), options)).rejects.toMatchObject({
      code: 'invalid_message',
      message: expect.stringMatching(new RegExp(`invalid outcome of ${tool}`)),
    });
    const late = call(tool, {});
    await expect(invokeTool(bus, late, { ...options, timeoutMs: 150 })).rejects.toMatchObject({
      code: 'timeout',
      details: { call_id: late.call_id },
    });
    const next = call(tool, {});
    const outcome = await invokeTool(bus, next, options);
    expect(outcome).toMatchObject({ call_id: next.call_id, output: { n: 4 } });
    sub.unsubscribe();
  });

  it("answers with the outcome's JSON, the output serialized once for the output and its preview", async () => {
    let serialized = 0;
    const text = 'say "hi"\n\u00e9\u2028\ud83d\ude00 \\';
    const onceTool = defineTool({
      name: 'test.once_json',
      description: 'Returns an output that counts how often it is turned into JSON.',
      input: z.object({ kind: z.enum(['object', 'string']) }),
      handler: ({ kind }) =>
        kind === 'string'
          ? text
          : {
              toJSON: () => {
                serialized++;
                return { text, list: [1, 2.5, null, true], nested: { '': -0 } };
              },
            },
    });
    await startWorker([onceTool]);
    for (const kind of ['object', 'string'] as const) {
      const c = call('test.once_json', { kind });
      const reply = await bus.request(s.toolInvoke('test.once_json'), JSON.stringify(c), { timeoutMs: 5000 });
      const body = reply.text();
      const outcome = JSON.parse(body) as Record<string, unknown>;
      // byte for byte what JSON.stringify makes of the outcome, members in the order they always had
      expect(body).toBe(JSON.stringify(outcome));
      expect(Object.keys(outcome)).toEqual([
        'call_id',
        'tool',
        'worker_id',
        'is_error',
        'output',
        'preview',
        'elapsed_ms',
        'attempts',
      ]);
      const output = kind === 'string' ? text : { text, list: [1, 2.5, null, true], nested: { '': 0 } };
      expect(outcome).toMatchObject({ call_id: c.call_id, is_error: false, output, attempts: 1 });
      expect(outcome['preview']).toBe(kind === 'string' ? text : JSON.stringify(output));
    }
    expect(serialized).toBe(1);
  });

  it('writes each outcome with its output serialized once when several are made before the first is answered', async () => {
    let serialized = 0;
    let entered = 0;
    let bothIn!: () => void;
    const inside = new Promise<void>((resolve) => (bothIn = resolve));
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const gatedTool = defineTool({
      name: 'test.gated_json',
      description: 'Waits at a shared gate, then returns an output that counts its serializations.',
      input: z.object({ n: z.number() }),
      handler: async ({ n }) => {
        if (++entered === 2) bothIn();
        await gate;
        return {
          toJSON: () => {
            serialized++;
            return { n };
          },
        };
      },
    });
    await startWorker([gatedTool]);
    const calls = [1, 2].map((n) => call('test.gated_json', { n }));
    const replies = calls.map((c) =>
      bus.request(s.toolInvoke('test.gated_json'), JSON.stringify(c), { timeoutMs: 5000 }),
    );
    await inside;
    open();
    const bodies = (await Promise.all(replies)).map((reply) => reply.text());
    bodies.forEach((body, i) => {
      const outcome = JSON.parse(body) as Record<string, unknown>;
      expect(body).toBe(JSON.stringify(outcome));
      expect(outcome).toMatchObject({
        call_id: calls[i]!.call_id,
        output: { n: i + 1 },
        preview: `{"n":${i + 1}}`,
      });
    });
    expect(serialized).toBe(2);
  });

  it('keeps big outputs in the JetStream object store, readable by their tenant only', async () => {
    const outcome = await invokeTool(
      bus,
      call('test.big', { n: 300_000 }, { identity: { tenant: 'acme' } }),
      { prefix },
    );
    expect(outcome.artifact).toMatchObject({ mime: 'application/json', size: 300_011 });
    expect(outcome.output).toBeUndefined();
    const ref = outcome.artifact!.ref;
    const slice = await requestJson(
      bus,
      s.artifactFetch,
      { ref, offset: 0, max_bytes: 12, identity: { tenant: 'acme' } },
      ArtifactFetchReplySchema,
    );
    expect(slice).toMatchObject({ text: '{"blob":"qqq', eof: false, size: 300_011 });
    await expect(
      requestJson(bus, s.artifactFetch, { ref, identity: { tenant: 'other' } }, ArtifactFetchReplySchema),
    ).rejects.toMatchObject({ code: 'not_found' });
  });

  it('cancels the calls of a run on its cancel subject', async () => {
    let running!: () => void;
    const started = new Promise<void>((r) => (running = r));
    const pending = invokeTool(bus, call('test.nap', { ms: 10_000 }, { run_id: 'run-cancel-me' }), {
      prefix,
      onProgress: (p) => p.kind === 'started' && running(),
    });
    await started;
    publishJson(bus, s.runCancel('run-cancel-me'), { reason: 'stop' });
    expect(await pending).toMatchObject({ is_error: true, error: { code: 'cancelled' } });
  });

  it('sends calls a full replica refuses (busy) to another replica', async () => {
    const a = await startWorker([defineTool({ ...napSpec('test.solo') })], 1);
    const b = await startWorker([defineTool({ ...napSpec('test.solo') })], 1);
    const outcomes = await Promise.all(
      Array.from({ length: 6 }, () => invokeTool(bus, call('test.solo', { ms: 60 }), { prefix })),
    );
    expect(outcomes.every((o) => !o.is_error)).toBe(true);
    expect(new Set(outcomes.map((o) => o.worker_id))).toEqual(new Set([a.workerId, b.workerId]));
  });

  it('registers with a catalog over NATS', async () => {
    const registered: string[] = [];
    const sub = serve({
      bus,
      subject: s.catalogRegister,
      schema: CatalogRegisterSchema,
      what: 'register',
      handler: (body) => {
        registered.push(body.worker_id);
        return { accepted: body.tools.map((t) => t.name), rejected: [], ttl_ms: 1000 };
      },
    });
    const w = new ToolWorker({ bus, tools: [sleepTool], prefix, logger: silentLogger() });
    await w.start();
    workers.push(w);
    expect((await w.whenRegistered()).accepted).toEqual(['test.nap']);
    expect(registered).toContain(w.workerId);
    sub.unsubscribe();
  });
});

function napSpec(name: string) {
  return {
    name,
    description: 'Sleeps.',
    input: z.object({ ms: z.number() }),
    handler: async ({ ms }: { ms: number }) => {
      await sleep(ms);
      return ms;
    },
  };
}

describe('a non-idempotent call whose worker goes silent mid-call', () => {
  const runs = new Map<string, number>();
  const onceTool = (name: string) =>
    defineTool({
      name,
      description: 'Counts its executions, then sleeps (not idempotent).',
      input: z.object({ ms: z.number() }),
      idempotent: false,
      handler: async ({ ms }, ctx) => {
        runs.set(ctx.callId, (runs.get(ctx.callId) ?? 0) + 1);
        await sleep(ms);
        return { ms };
      },
    });
  const own: { worker: ToolWorker; bus: NatsBus }[] = [];
  async function ownWorker(tool: Tool<any, any>, sharedOutcomes: false | { claimStaleMs: number }) {
    const wbus = await NatsBus.connect(natsUrl);
    const worker = new ToolWorker({
      bus: wbus,
      tools: [tool],
      prefix,
      logger: silentLogger(),
      register: false,
      sharedOutcomes,
    });
    await worker.start();
    await wbus.flush();
    own.push({ worker, bus: wbus });
    return worker;
  }
  /** Calls `tool` and cuts the connection of the worker that announces `started` for it (as a kill -9 would). */
  async function callAndCut(tool: string) {
    const started: { worker_id: string; dedup?: string }[] = [];
    const result = await invokeTool(bus, call(tool, { ms: 2500 }), {
      prefix,
      lostAfterMs: 400,
      timeoutMs: 15_000,
      onProgress: (p) => {
        if (p.kind !== 'started') return;
        started.push(p);
        if (started.length === 1) void own.find((o) => o.worker.workerId === p.worker_id)?.bus.close();
      },
    }).then(
      (outcome) => ({ outcome, error: undefined }),
      (error: unknown) => ({ outcome: undefined, error }),
    );
    return { ...result, started };
  }
  afterAll(async () => {
    for (const o of own) await o.bus.close();
  });

  it('without a shared outcome store: fails at once with a non-retryable worker_lost, never sent again', async () => {
    await ownWorker(onceTool('test.once_local'), false);
    const { outcome, error, started } = await callAndCut('test.once_local');
    expect(outcome).toBeUndefined();
    expect(started).toHaveLength(1);
    expect(started[0]!.dedup).toBeUndefined();
    expect(error).toMatchObject({ code: 'worker_lost', retryable: false });
    expect((error as Error).message).toMatch(/may have run, so the call was not sent again/);
    expect([...runs.values()]).toEqual([1]);
  });

  it('with the shared store: re-sent, and the replica that gets it refuses it as "may have run"; it ran once', async () => {
    runs.clear();
    await ownWorker(onceTool('test.once_shared'), { claimStaleMs: 600 });
    await ownWorker(onceTool('test.once_shared'), { claimStaleMs: 600 });
    const { outcome, error, started } = await callAndCut('test.once_shared');
    expect(error).toBeUndefined();
    expect(started[0]).toMatchObject({ dedup: 'shared' });
    const first = started[0]!.worker_id;
    expect(outcome).toMatchObject({
      is_error: true,
      dedup: 'shared',
      error: { code: 'worker_lost', retryable: false, details: { first_worker_id: first } },
    });
    expect(outcome!.worker_id).not.toBe(first);
    expect(outcome!.error!.message).toMatch(/may have run/);
    expect([...runs.values()]).toEqual([1]);
  });
});
