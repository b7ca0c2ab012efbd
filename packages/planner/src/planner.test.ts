import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import pino from 'pino';
import { z } from 'zod';
import {
  AgentMeshError,
  CatalogListSchema,
  ErrorCode,
  MemoryBus,
  publishJson,
  serve,
  silentLogger,
  subjects,
  type CatalogListReply,
  type KvBucketOptions,
  type KvStore,
  type Logger,
  type RunEvent,
  type RunRequestInput,
  type ToolInvocation,
} from '@agentmesh/protocol';
import { Catalog } from '@agentmesh/catalog';
import { ToolWorker, defineTool, type Tool } from '@agentmesh/tool-worker';
import { Planner, type PlannerOptions } from './planner.js';
import { followRun, submitRun } from './infra/run-client.js';
import type { RunSnapshot } from './model/snapshot.js';

const calc = defineTool({
  name: 'math.add',
  description: 'Adds two numbers.',
  input: z.object({ a: z.number(), b: z.number() }),
  output: z.number(),
  idempotent: true,
  handler: ({ a, b }) => a + b,
});

const hash = defineTool({
  name: 'crypto.digest',
  description: 'Hashes text with sha256 and returns the hex digest.',
  input: z.object({ text: z.string() }),
  loading: 'deferred',
  handler: ({ text }) => `digest of ${text}`,
});

/** Waits until its call is cancelled (or `ms` pass). */
const slow = defineTool({
  name: 'test.slow',
  description: 'Waits.',
  input: z.object({ ms: z.number() }),
  idempotent: true,
  handler: ({ ms }, ctx) =>
    new Promise<string>((resolve) => {
      const timer = setTimeout(() => resolve('slept'), ms);
      ctx.signal.addEventListener('abort', () => {
        clearTimeout(timer);
        resolve('aborted');
      });
    }),
});

interface Mesh {
  bus: MemoryBus;
  planner: Planner;
  stop(): Promise<void>;
}

let mesh: Mesh | undefined;
afterEach(async () => {
  await mesh?.stop();
  mesh = undefined;
});

/** A real Catalog, a real ToolWorker (when given tools) and the planner on one in-process bus. */
async function startMesh(
  tools: Tool<any, any>[],
  options: Partial<PlannerOptions> = {},
  bus = new MemoryBus(),
): Promise<Mesh> {
  const catalog = new Catalog({ bus, logger: silentLogger() });
  await catalog.start();
  const worker =
    tools.length > 0 ? new ToolWorker({ bus, tools, logger: silentLogger(), threads: 1 }) : undefined;
  await worker?.start();
  const planner = new Planner({ bus, logger: silentLogger(), plannerId: 'planner-unit', ...options });
  mesh = {
    bus,
    planner,
    async stop() {
      await planner.drain();
      await worker?.drain();
      await catalog.stop();
      await bus.close();
    },
  };
  return mesh;
}

async function execute(m: Mesh, request: RunRequestInput, signal?: AbortSignal) {
  const events: RunEvent[] = [];
  const final = await m.planner.execute(request, {
    onEvent: (e) => events.push(e),
    ...(signal ? { signal } : {}),
  });
  return { final, events };
}

const add = (a: number, b: number) => ({ name: 'math__add', arguments: { a, b } });
const types = (events: RunEvent[]) => events.map((e) => e.type);
const ofType = <T extends RunEvent['type']>(events: RunEvent[], type: T) =>
  events.filter((e): e is Extract<RunEvent, { type: T }> => e.type === type);

/** An onEvent listener that records events, and a promise of the first event of `type`. */
function recorder(type: RunEvent['type']) {
  const events: RunEvent[] = [];
  let seen: () => void = () => undefined;
  const first = new Promise<void>((resolve) => (seen = resolve));
  const onEvent = (e: RunEvent) => {
    events.push(e);
    if (e.type === type) seen();
  };
  return { events, first, onEvent };
}

describe('planner entry paths (real Catalog and ToolWorker, in-process bus)', () => {
  it('embedded: execute runs a task to done through the worker', async () => {
    const m = await startMesh([calc]);
    const { final, events } = await execute(m, {
      id: 'entry-embedded',
      task: 'add 2 and 3',
      script: [{ tool_calls: [add(2, 3)] }, { text: 'five' }],
    });
    expect(final).toMatchObject({ type: 'run.completed', status: 'done', text: 'five', tool_calls: 1 });
    expect(ofType(events, 'tool.completed')[0]).toMatchObject({ name: 'math.add', preview: '5' });
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
  });

  it('submitted: a run on runs.submit is accepted with its id and followed to its end', async () => {
    const m = await startMesh([calc]);
    await m.planner.start();
    const followed = followRun(m.bus, 'entry-submitted');
    const submitted = await submitRun(m.bus, {
      id: 'entry-submitted',
      task: 'add',
      script: [{ tool_calls: [add(1, 1)] }, { text: 'two' }],
    });
    expect(submitted.run_id).toBe('entry-submitted');
    expect(await followed).toMatchObject({ status: 'done', text: 'two' });
  });

  it('submitted: an invalid request is refused to the submitter and reported as run.failed', async () => {
    const m = await startMesh([calc]);
    await m.planner.start();
    const followed = followRun(m.bus, 'entry-bad');
    await expect(submitRun(m.bus, { id: 'entry-bad', task: '' })).rejects.toThrow(
      /invalid run request.*task/,
    );
    expect(await followed).toMatchObject({ type: 'run.failed', error: { code: 'invalid_request' } });
  });

  it('resumed: a run continues from a checkpoint taken between its model turn and its tool calls', async () => {
    const snapshots: RunSnapshot[] = [];
    const first = await startMesh([calc], {
      checkpoint: (s) => void snapshots.push(structuredClone(s) as RunSnapshot),
    });
    const request = {
      id: 'entry-resume',
      task: 'add twice',
      script: [{ tool_calls: [add(1, 2)] }, { tool_calls: [add(3, 4)] }, { text: 'done: 3 and 7' }],
    };
    await execute(first, request);
    const checkpoint = snapshots.find((s) => s.phase === 'tools' && s.iteration === 2)!;
    expect(checkpoint).toBeDefined();
    await first.stop();

    const second = await startMesh([calc], { plannerId: 'planner-resumer' });
    const events: RunEvent[] = [];
    const final = await second.planner.resume(checkpoint, { onEvent: (e) => events.push(e) });
    expect(final).toMatchObject({ status: 'done', text: 'done: 3 and 7', iterations: 3, tool_calls: 2 });
    expect(events[0]).toMatchObject({ type: 'run.started', resumed: true, planner_id: 'planner-resumer' });
    expect(events[0]!.seq).toBe(checkpoint.seq + 1);
    expect(types(events)).toEqual([
      'run.started',
      'tool.started',
      'tool.completed',
      'llm.request',
      'llm.response',
      'run.completed',
    ]);
    expect(ofType(events, 'tool.completed')[0]!.preview).toBe('7');
  });
});

/** A bus whose shared tool outcome store times out its next `createFailures` creates, as a cluster electing a leader. */
class StoreTimeoutBus extends MemoryBus {
  createFailures = 0;

  override async kv(bucket: string, options?: KvBucketOptions): Promise<KvStore> {
    const store = await super.kv(bucket, options);
    if (!bucket.endsWith('_tool_outcomes')) return store;
    const create = store.create.bind(store);
    store.create = (key, value) =>
      this.createFailures-- > 0 ? Promise.reject(new Error('TIMEOUT')) : create(key, value);
    return store;
  }
}

describe('a resumed run sending again the calls of its batch (real Catalog and ToolWorker, in-process bus)', () => {
  let charges = 0;
  const charge = defineTool({
    name: 'billing.charge',
    description: 'Charges an amount (not idempotent).',
    input: z.object({ amount: z.number() }),
    idempotent: false,
    handler: ({ amount }) => {
      charges++;
      return `charged ${amount}`;
    },
  });
  const request = {
    id: 'resend-charge',
    task: 'charge 5',
    script: [{ tool_calls: [{ name: 'billing__charge', arguments: { amount: 5 } }] }, { text: 'charged' }],
  };
  const toolMessage = (snapshot: RunSnapshot | undefined) =>
    snapshot?.messages.find((m) => m.role === 'tool')?.content ?? '';

  it('a fresh run whose replica could not read the outcome store is told the call did not run', async () => {
    charges = 0;
    const bus = new StoreTimeoutBus();
    bus.createFailures = 1;
    const snapshots: RunSnapshot[] = [];
    const m = await startMesh([charge], { checkpoint: (s) => void snapshots.push(structuredClone(s)) }, bus);
    const { final } = await execute(m, request);
    expect(final).toMatchObject({ status: 'done' });
    expect(toolMessage(snapshots.at(-1))).toContain('did not run');
    expect(charges).toBe(0);
  });

  it('a resumed run asks again until the store can tell, since the lost planner may have sent the call', async () => {
    charges = 0;
    const snapshots: RunSnapshot[] = [];
    const first = await startMesh([charge], { checkpoint: (s) => void snapshots.push(structuredClone(s)) });
    await execute(first, request);
    const checkpoint = snapshots.find((s) => s.phase === 'tools')!;
    expect(checkpoint).toBeDefined();
    await first.stop();
    charges = 0;

    const bus = new StoreTimeoutBus();
    bus.createFailures = 2;
    const resumedSnapshots: RunSnapshot[] = [];
    const second = await startMesh(
      [charge],
      { plannerId: 'planner-resumer', checkpoint: (s) => void resumedSnapshots.push(structuredClone(s)) },
      bus,
    );
    const final = await second.planner.resume(checkpoint);
    expect(final).toMatchObject({ status: 'done', text: 'charged' });
    expect(toolMessage(resumedSnapshots.at(-1))).toBe('charged 5');
    expect(bus.createFailures).toBeLessThan(0); // both failed creates were answered, then the store told
    expect(charges).toBe(1);
  });
});

describe('planner final statuses (real Catalog and ToolWorker, in-process bus)', () => {
  it('done', async () => {
    const m = await startMesh([calc]);
    const { final } = await execute(m, { task: 't', script: [{ text: 'answer' }] });
    expect(final).toMatchObject({ status: 'done', text: 'answer' });
  });

  it('stuck: turns with neither a tool call nor an answer', async () => {
    const m = await startMesh([calc]);
    const { final } = await execute(m, {
      task: 't',
      limits: { max_nudges: 1 },
      script: [{ text: '' }, { text: '' }],
    });
    expect(final).toMatchObject({ status: 'stuck' });
  });

  it('budget_exhausted: max_iterations', async () => {
    const m = await startMesh([calc]);
    const { final } = await execute(m, {
      task: 't',
      limits: { max_iterations: 1 },
      script: [{ tool_calls: [add(1, 1)] }, { text: 'never' }],
    });
    expect(final).toMatchObject({
      status: 'budget_exhausted',
      reason: expect.stringMatching(/max_iterations/),
    });
  });

  it('failed: require_successful_tools unmet', async () => {
    const m = await startMesh([calc]);
    const { final } = await execute(m, {
      task: 't',
      require_successful_tools: ['math.add'],
      limits: { max_nudges: 0 },
      script: [{ text: 'I will not use a tool' }],
    });
    expect(final).toMatchObject({
      status: 'failed',
      reason: expect.stringMatching(/require_successful_tools/),
    });
  });

  it('cancelled: a cancel on runs.<id>.cancel stops the tool call in flight', async () => {
    const m = await startMesh([slow]);
    const { events, first, onEvent } = recorder('tool.started');
    const running = m.planner.execute(
      {
        id: 'st-cancel',
        task: 't',
        script: [{ tool_calls: [{ name: 'test__slow', arguments: { ms: 60_000 } }] }],
      },
      { onEvent },
    );
    await first;
    publishJson(m.bus, subjects().runCancel('st-cancel'), { reason: 'user' });
    expect(await running).toMatchObject({ status: 'cancelled', reason: 'cancelled: user' });
    expect(ofType(events, 'tool.failed')[0]!.error.code).toBe(ErrorCode.Cancelled);
  });

  it('timeout: limits.timeout_ms', async () => {
    const m = await startMesh([slow]);
    const { final } = await execute(m, {
      task: 't',
      limits: { timeout_ms: 200 },
      // the worker is not told about a run timeout (only about a cancel), so its call ends on its own
      script: [{ tool_calls: [{ name: 'test__slow', arguments: { ms: 2_000 } }] }],
    });
    expect(final).toMatchObject({ status: 'timeout' });
  });
});

describe('planner-level tool retries (real ToolWorker)', () => {
  it('a retried non-idempotent call runs again under a fresh key, never replaying the first cached error', async () => {
    let executions = 0;
    const flaky = defineTool({
      name: 'test.flaky',
      description: 'Fails its first execution with a retryable error.',
      input: z.object({}),
      idempotent: false,
      retry: { max_attempts: 1 },
      handler: () => {
        executions++;
        if (executions === 1)
          throw new AgentMeshError(ErrorCode.Unavailable, 'backend hiccup', { retryable: true });
        return 'ok';
      },
    });
    const m = await startMesh([flaky]);
    const keys: string[] = [];
    m.bus.subscribe('agentmesh.tool.invoke.test.flaky', (msg) => {
      keys.push((JSON.parse(msg.text()) as ToolInvocation).idempotency_key!);
    });
    const { final, events } = await execute(m, {
      id: 'retry-run',
      task: 't',
      tool_retries: 2,
      script: [{ tool_calls: [{ id: 'c1', name: 'test__flaky', arguments: {} }] }, { text: 'fine' }],
    });
    expect(final).toMatchObject({ status: 'done' });
    expect(executions).toBe(2);
    expect(keys).toEqual(['retry-run:1:c1', 'retry-run:1:c1#2']);
    const completed = ofType(events, 'tool.completed')[0]!;
    expect(completed).toMatchObject({ name: 'test.flaky', preview: 'ok', attempts: 2 });
    expect(ofType(events, 'tool.failed')).toHaveLength(0);
  });

  it('without tool_retries a failed call is reported once', async () => {
    const failing = defineTool({
      name: 'test.broken',
      description: 'Always fails.',
      input: z.object({}),
      retry: { max_attempts: 1 },
      handler: () => {
        throw new AgentMeshError(ErrorCode.Unavailable, 'down', { retryable: true });
      },
    });
    const m = await startMesh([failing]);
    const { events } = await execute(m, {
      task: 't',
      script: [{ tool_calls: [{ name: 'test__broken', arguments: {} }] }, { text: 'gave up' }],
    });
    expect(ofType(events, 'tool.failed')).toMatchObject([{ attempts: 1, error: { code: 'unavailable' } }]);
  });
});

describe('run warnings, canonical names in search, the per-run log line', () => {
  it('warns no_tools when no tool is registered at all', async () => {
    const m = await startMesh([]);
    const { final, events } = await execute(m, { task: 't', script: [{ text: 'nothing to do' }] });
    expect(final).toMatchObject({ status: 'done' });
    expect(ofType(events, 'run.warning')).toMatchObject([
      { code: 'no_tools', message: 'no tools are registered: start a worker' },
    ]);
    expect(types(events).indexOf('run.warning')).toBeLessThan(types(events).indexOf('llm.request'));
  });

  it('warns unknown_tool_scope for an allow-list entry that matches no tool, naming the closest', async () => {
    const m = await startMesh([calc, hash]);
    const { events } = await execute(m, {
      task: 't',
      tools: ['math', 'crypt.digest'],
      script: [{ text: 'x' }],
    });
    const warnings = ofType(events, 'run.warning');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ code: 'unknown_tool_scope' });
    expect(warnings[0]!.message).toMatch(/"crypt\.digest".*closest known: crypto\.digest/);
  });

  it('no warning when every allow-list entry matches', async () => {
    const m = await startMesh([calc, hash]);
    const { events } = await execute(m, {
      task: 't',
      tools: ['math', 'crypto.digest'],
      script: [{ text: 'x' }],
    });
    expect(ofType(events, 'run.warning')).toEqual([]);
  });

  it('tool_search shows canonical names to the model and in tool.search events', async () => {
    const m = await startMesh([calc, hash]);
    const { events } = await execute(m, {
      task: 't',
      script: [
        { tool_calls: [{ name: 'tool_search', arguments: { query: 'sha256 hash text' } }] },
        { tool_calls: [{ name: 'crypto__digest', arguments: { text: 'a' } }] },
        { text: 'done' },
      ],
    });
    expect(ofType(events, 'tool.search')[0]!.results).toEqual(['crypto.digest']);
    const preview = ofType(events, 'tool.completed')[0]!.preview;
    expect(preview).toContain('"crypto.digest"');
    expect(preview).not.toContain('crypto__digest');
    expect(ofType(events, 'tool.completed')[1]).toMatchObject({ name: 'crypto.digest' });
  });

  it('logs one info line per run when it ends: id, status, duration, tool calls, iterations', async () => {
    const lines: Record<string, unknown>[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString().split('\n')) if (line.trim()) lines.push(JSON.parse(line));
        done();
      },
    });
    const logger = pino({ level: 'info' }, sink) as unknown as Logger;
    const m = await startMesh([calc], { logger });
    await execute(m, {
      id: 'logged-run',
      task: 't',
      script: [{ tool_calls: [add(1, 2)] }, { text: 'three' }],
    });
    const ended = lines.filter((l) => l.msg === 'run ended');
    expect(ended).toHaveLength(1);
    expect(ended[0]).toMatchObject({
      level: 30,
      run_id: 'logged-run',
      status: 'done',
      tool_calls: 1,
      iterations: 2,
      duration_ms: expect.any(Number),
    });
  });
});

describe('many parallel calls in one run', () => {
  it('listen on the run signal without a MaxListenersExceededWarning', async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      const m = await startMesh([calc], { defaults: { limits: { tool_concurrency: 24 } } });
      const calls = Array.from({ length: 24 }, (_, i) => add(i, 1));
      const { final } = await execute(m, {
        id: 'parallel-listeners',
        task: 'add many',
        limits: { tool_concurrency: 24 },
        script: [{ tool_calls: calls }, { text: 'done' }],
      });
      expect(final).toMatchObject({ status: 'done', tool_calls: 24 });
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });
});

describe('a burst of runs', () => {
  it('is set up a few runs at a time: the first runs ask their model before the last ones load their tools', async () => {
    const m = await startMesh([calc]);
    let lists = 0;
    const sub = m.bus.subscribe(subjects('agentmesh').catalogList, () => {
      lists++;
    });
    let listsAtFirstModelCall: number | undefined;
    const onEvent = (e: RunEvent) => {
      if (e.type === 'llm.request') listsAtFirstModelCall ??= lists;
    };
    try {
      const finals = await Promise.all(
        Array.from({ length: 300 }, (_, i) =>
          m.planner.execute(
            {
              id: `burst-${i}`,
              task: 'add',
              // a scope of its own per run: runs of one scope set up together share one list request
              deferred: [`scope${i}.*`],
              script: [{ tool_calls: [add(i, 1)] }, { text: 'done' }],
            },
            { onEvent },
          ),
        ),
      );
      expect(finals.filter((f) => f.type === 'run.completed' && f.status === 'done')).toHaveLength(300);
      expect(lists).toBe(300);
      expect(listsAtFirstModelCall).toBeGreaterThan(0);
      expect(listsAtFirstModelCall).toBeLessThan(100);
    } finally {
      sub.unsubscribe();
    }
  });

  it('a setup waiting on the network gives its place up: 64 runs whose catalog answers only once all 64 asked', async () => {
    const bus = new MemoryBus();
    const held: (() => void)[] = [];
    const catalog = serve({
      bus,
      subject: subjects('agentmesh').catalogList,
      schema: CatalogListSchema,
      what: 'list',
      handler: () =>
        new Promise<CatalogListReply>((resolve) => {
          held.push(() => resolve({ tools: [], version: 'v1' }));
          if (held.length === 64) for (const answer of held) answer();
        }),
    });
    const planner = new Planner({ bus, logger: silentLogger(), plannerId: 'planner-held' });
    try {
      const finals = await Promise.all(
        Array.from({ length: 64 }, (_, i) =>
          planner.execute({
            id: `held-${i}`,
            task: 'wait',
            // a scope of its own per run, so each asks the catalog (runs of one scope share one request)
            deferred: [`scope${i}.*`],
            script: [{ text: 'done' }],
          }),
        ),
      );
      expect(finals.filter((f) => f.type === 'run.completed' && f.status === 'done')).toHaveLength(64);
      expect(held).toHaveLength(64);
    } finally {
      await planner.drain();
      catalog.unsubscribe();
      await bus.close();
    }
  });
});
