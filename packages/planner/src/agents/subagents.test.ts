import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  MemoryBus,
  silentLogger,
  type RunEvent,
  type RunEventOf,
  type RunRequestInput,
} from '@agentmesh/protocol';
import { Catalog } from '@agentmesh/catalog';
import { ToolWorker, defineTool } from '@agentmesh/tool-worker';
import { Planner, type PlannerOptions } from '../planner.js';
import { followRun } from '../client.js';
import { childRunId } from './children.js';

const add = defineTool({
  name: 'math.add',
  description: 'Adds two numbers.',
  input: z.object({ a: z.number(), b: z.number() }),
  idempotent: true,
  handler: ({ a, b }) => a + b,
});
const digest = defineTool({
  name: 'crypto.digest',
  description: 'Hashes text.',
  input: z.object({ text: z.string() }),
  handler: ({ text }) => `digest of ${text}`,
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

/** A real Catalog and ToolWorker, and a started planner that also takes the children from `runs.submit`. */
async function startMesh(options: Partial<PlannerOptions> = {}, intake = true): Promise<Mesh> {
  const bus = new MemoryBus();
  const catalog = new Catalog({ bus, logger: silentLogger() });
  await catalog.start();
  const worker = new ToolWorker({ bus, tools: [add, digest], logger: silentLogger(), threads: 1 });
  await worker.start();
  const planner = new Planner({ bus, logger: silentLogger(), plannerId: 'planner-sub', ...options });
  if (intake) await planner.start();
  mesh = {
    bus,
    planner,
    async stop() {
      await planner.drain();
      await worker.drain();
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

const of = <T extends RunEvent['type']>(events: RunEvent[], type: T) =>
  events.filter((e): e is RunEventOf<T> => e.type === type);
const usage = (input: number, output: number) => ({ input_tokens: input, output_tokens: output });
const childCall = (id: string, args: Record<string, unknown>, name = 'agent__run') => ({
  id,
  name,
  arguments: args,
});

describe('agent.* meta-tools on the in-process bus', () => {
  it('runs three agent.run calls of one turn as parallel children and rolls up their usage', async () => {
    const m = await startMesh();
    const child = (n: number) => ({
      task: `part ${n}`,
      script: [
        { tool_calls: [{ name: 'math.add', arguments: { a: n, b: n } }], usage: usage(10, 2) },
        { text: `part ${n} is ${2 * n}`, usage: usage(20, 5) },
      ],
    });
    const { final, events } = await execute(m, {
      id: 'parent-three',
      task: 'split the work',
      tools: ['agent', 'math'],
      script: [
        {
          tool_calls: [childCall('c1', child(1)), childCall('c2', child(2)), childCall('c3', child(3))],
          usage: usage(100, 10),
        },
        { text: 'all parts done', usage: usage(200, 20) },
      ],
    });
    expect(final).toMatchObject({ type: 'run.completed', status: 'done', text: 'all parts done' });
    const started = of(events, 'agent.started');
    expect(started.map((e) => e.call_id)).toEqual(['c1', 'c2', 'c3']);
    expect(started.map((e) => e.child_run_id)).toEqual(
      ['c1', 'c2', 'c3'].map((c) => childRunId('parent-three', 1, c)),
    );
    expect(of(events, 'agent.completed').map((e) => e.status)).toEqual(['done', 'done', 'done']);
    const results = of(events, 'tool.completed').map((e) => e.preview);
    expect(results.sort()).toEqual(['part 1 is 2', 'part 2 is 4', 'part 3 is 6']);
    // the three children overlapped: each started before any ended
    const firstEnd = events.findIndex((e) => e.type === 'agent.completed');
    expect(events.findLastIndex((e) => e.type === 'agent.started')).toBeLessThan(firstEnd);
    if (final.type !== 'run.completed') throw new Error('expected run.completed');
    expect(final.usage.input_tokens).toBe(300 + 3 * 30);
    expect(final.usage.output_tokens).toBe(30 + 3 * 7);
    expect(final.usage.children).toHaveLength(3);
    expect(final.usage.children![0]).toMatchObject({ input_tokens: 30, output_tokens: 7, tool_calls: 1 });
    // 3 agent.run calls of the parent and one math.add per child
    expect(final.tool_calls).toBe(6);
  });

  it("returns a child's validated output as JSON", async () => {
    const m = await startMesh();
    const { final, events } = await execute(m, {
      task: 'structured',
      tools: ['agent'],
      script: [
        {
          tool_calls: [
            childCall('c1', {
              task: 'give a number',
              output_schema: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] },
              script: [{ text: '{"n": 7}' }],
            }),
          ],
        },
        { text: 'ok' },
      ],
    });
    expect(final).toMatchObject({ status: 'done' });
    expect(JSON.parse(of(events, 'tool.completed')[0]!.preview)).toEqual({ n: 7 });
  });

  it('refuses a child whose output_schema runs a regex, before the child starts', async () => {
    const m = await startMesh();
    const { final, events } = await execute(m, {
      task: 'structured',
      tools: ['agent'],
      script: [
        {
          tool_calls: [
            childCall('c1', {
              task: 'give letters',
              output_schema: { type: 'string', pattern: '^(a+)+$' },
              script: [{ text: '"aaaa"' }],
            }),
          ],
        },
        { text: 'refused' },
      ],
    });
    expect(final).toMatchObject({ status: 'done' });
    const failed = of(events, 'tool.failed')[0];
    expect(failed?.error.code).toBe('invalid_arguments');
    expect(failed?.error.message).toMatch(/output_schema: keyword "pattern" at # is refused/);
    expect(of(events, 'agent.started')).toHaveLength(0);
  });

  it('refuses a child asking for tools its parent may not use, naming what is allowed', async () => {
    const m = await startMesh();
    const { events } = await execute(m, {
      task: 'narrow',
      tools: ['agent', 'math'],
      script: [
        { tool_calls: [childCall('c1', { task: 'hash', tools: ['crypto'], script: [{ text: 'x' }] })] },
        { text: 'refused' },
      ],
    });
    const failed = of(events, 'tool.failed')[0];
    expect(failed?.error.code).toBe('tools_not_allowed');
    expect(failed?.error.message).toMatch(/crypto not allowed; allowed: agent, math/);
    expect(of(events, 'agent.started')).toHaveLength(0);
  });

  it('enforces subagents.max_depth and max_children with named errors', async () => {
    const m = await startMesh({ defaults: { subagents: { max_depth: 1, max_children: 2 } } });
    const everything: RunEvent[] = [];
    m.bus.subscribe(
      'agentmesh.runs.*.events',
      (msg) => void everything.push(JSON.parse(msg.text()) as RunEvent),
    );
    const grandchild = { task: 'deeper', script: [{ text: 'never' }] };
    const child = (n: number) => ({
      task: `child ${n}`,
      script: [{ tool_calls: [childCall('g1', grandchild)] }, { text: `child ${n} done` }],
    });
    const { events } = await execute(m, {
      id: 'parent-limits',
      task: 'limits',
      tools: ['agent'],
      script: [
        {
          tool_calls: [childCall('c1', child(1)), childCall('c2', child(2)), childCall('c3', child(3))],
        },
        { text: 'done' },
      ],
    });
    expect(of(events, 'tool.failed').map((e) => e.error.code)).toEqual(['too_many_children']);
    expect(
      of(events, 'tool.completed')
        .map((e) => e.preview)
        .sort(),
    ).toEqual(['child 1 done', 'child 2 done']);
    const childFailures = everything.filter(
      (e): e is RunEventOf<'tool.failed'> => e.type === 'tool.failed' && e.run_id !== 'parent-limits',
    );
    expect(childFailures.map((e) => e.error.code)).toEqual(['depth_exceeded', 'depth_exceeded']);
    expect(childFailures[0]!.error.message).toMatch(/subagents\.max_depth is 1/);
  });

  it('spawns, lists and waits for children', async () => {
    const m = await startMesh();
    const { final, events } = await execute(m, {
      id: 'parent-spawn',
      task: 'spawn',
      tools: ['agent'],
      script: [
        { tool_calls: [childCall('s1', { task: 'a', script: [{ text: 'answer a' }] }, 'agent__spawn')] },
        {
          tool_calls: [
            childCall(
              'w1',
              { run_ids: [childRunId('parent-spawn', 1, 's1')], timeout_ms: 30_000 },
              'agent__wait',
            ),
            childCall('l1', {}, 'agent__list'),
          ],
        },
        { text: 'collected' },
      ],
    });
    expect(final).toMatchObject({ status: 'done' });
    const result = (callId: string) =>
      JSON.parse(of(events, 'tool.completed').find((e) => e.call_id === callId)!.preview);
    const [spawned, waited, listed] = [result('s1'), result('w1'), result('l1')];
    expect(spawned).toEqual({ run_id: childRunId('parent-spawn', 1, 's1') });
    expect(waited.children[0]).toMatchObject({ status: 'done', text: 'answer a' });
    expect(listed.children[0]).toMatchObject({ task: 'a', call_id: 's1' });
  });

  it('cancelling a parent cancels its child and grandchild', async () => {
    const m = await startMesh();
    const parentId = 'parent-cancel';
    const childId = childRunId(parentId, 1, 'c1');
    const grandchildId = childRunId(childId, 1, 'g1');
    const grandchild = { task: 'wait', script: [{ text: 'too late', delay_ms: 60_000 }] };
    const child = { task: 'child', script: [{ tool_calls: [childCall('g1', grandchild)] }, { text: 'x' }] };
    const grandFinal = followRun(m.bus, grandchildId);
    const grandStarted = new Promise<void>((resolve) => {
      const sub = m.bus.subscribe(`agentmesh.runs.${grandchildId}.events`, (msg) => {
        if ((JSON.parse(msg.text()) as RunEvent).type === 'llm.request') {
          sub.unsubscribe();
          resolve();
        }
      });
    });
    const controller = new AbortController();
    const parent = execute(
      m,
      {
        id: parentId,
        task: 'cancel me',
        tools: ['agent'],
        script: [{ tool_calls: [childCall('c1', child)] }],
      },
      controller.signal,
    );
    await grandStarted;
    const cancelledAt = performance.now();
    controller.abort(new Error('user'));
    const final = await grandFinal;
    const elapsed = performance.now() - cancelledAt;
    expect(final).toMatchObject({ type: 'run.completed', status: 'cancelled' });
    expect(elapsed).toBeLessThan(2_000);
    expect((await parent).final).toMatchObject({ status: 'cancelled' });
  });

  it('agent.cancel stops a spawned child, agent.send_input reaches it, and a parent ending cancels the rest', async () => {
    const m = await startMesh();
    const parentId = 'parent-steer';
    const first = childRunId(parentId, 1, 's1');
    const second = childRunId(parentId, 1, 's2');
    const inputs: string[] = [];
    m.bus.subscribe(`agentmesh.runs.${first}.input`, (msg) => void inputs.push(msg.text()));
    const slow = (task: string) => ({ task, script: [{ text: 'late', delay_ms: 60_000 }] });
    const finals = [followRun(m.bus, first), followRun(m.bus, second)];
    const { final, events } = await execute(m, {
      id: parentId,
      task: 'steer',
      tools: ['agent'],
      script: [
        {
          tool_calls: [
            childCall('s1', slow('one'), 'agent__spawn'),
            childCall('s2', slow('two'), 'agent__spawn'),
          ],
        },
        {
          tool_calls: [
            childCall('i1', { run_id: first, text: 'hurry' }, 'agent__send_input'),
            childCall('x1', { run_id: first }, 'agent__cancel'),
            childCall('x2', { run_id: 'someone-else' }, 'agent__cancel'),
          ],
        },
        { tool_calls: [childCall('w1', { run_ids: [first], timeout_ms: 30_000 }, 'agent__wait')] },
        { text: 'leaving the second child behind' },
      ],
    });
    expect(final).toMatchObject({ status: 'done' });
    expect(inputs).toEqual([JSON.stringify({ text: 'hurry' })]);
    const failed = of(events, 'tool.failed');
    expect(failed.map((e) => [e.call_id, e.error.code])).toEqual([['x2', 'not_found']]);
    const waited = JSON.parse(of(events, 'tool.completed').find((e) => e.call_id === 'w1')!.preview);
    expect(waited.children[0]).toMatchObject({ run_id: first, status: 'cancelled' });
    // the second child was still running when the parent ended: it is cancelled too
    expect(await finals[1]).toMatchObject({ type: 'run.completed', status: 'cancelled' });
    expect(await finals[0]).toMatchObject({ status: 'cancelled' });
  });

  it('names the failure when no planner takes the child, and does not count it', async () => {
    const m = await startMesh({}, false);
    const { events } = await execute(m, {
      id: 'parent-alone',
      task: 'alone',
      tools: ['agent'],
      script: [
        { tool_calls: [childCall('c1', { task: 'a', script: [{ text: 'a' }] })] },
        { tool_calls: [childCall('l1', {}, 'agent__list')] },
        { text: 'nobody took it' },
      ],
    });
    expect(of(events, 'tool.failed')[0]?.error.code).toMatch(/no_responders|unavailable|timeout/);
    expect(of(events, 'agent.completed')[0]).toMatchObject({ call_id: 'c1', status: 'failed' });
    expect(JSON.parse(of(events, 'tool.completed')[0]!.preview)).toEqual({ children: [] });
  });
});
