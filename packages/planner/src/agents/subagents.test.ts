import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  MemoryBus,
  respondJson,
  silentLogger,
  type RunEvent,
  type RunEventOf,
  type RunRequest,
  type RunRequestInput,
} from '@agentmesh/protocol';
import { Catalog } from '@agentmesh/catalog';
import { ToolWorker, defineTool } from '@agentmesh/tool-worker';
import { startOpenAiServer } from '../../../../test/fixtures/llm/openai-server.js';
import type { FakeLlmServer, FakeReply } from '../../../../test/fixtures/llm/common.js';
import { Planner, type PlannerOptions } from '../planner.js';
import { submitRun } from '../infra/run-client.js';
import { sendApprovalDecision } from '../hitl/approval-service.js';
import type { RunSnapshot } from '../model/snapshot.js';
import { childRunId } from './children.js';

const add = defineTool({
  name: 'math.add',
  description: 'Adds two numbers.',
  input: z.object({ a: z.number(), b: z.number() }),
  idempotent: true,
  handler: ({ a, b }) => a + b,
});
const shellCommands: string[] = [];
const shell = defineTool({
  name: 'shell.run_command',
  description: 'Runs a shell command.',
  input: z.object({ command: z.string() }),
  handler: ({ command }) => {
    shellCommands.push(command);
    return `ran ${command}`;
  },
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
  /** Every run event on the bus (children's included), and the first one (seen or to come) that passes a test. */
  seen: RunEvent[];
  next<T extends RunEvent>(test: (e: RunEvent) => e is T): Promise<T>;
  next(test: (e: RunEvent) => boolean): Promise<RunEvent>;
  /** Every request submitted on `runs.submit` (the children's). */
  submitted: RunRequest[];
  stop(): Promise<void>;
}
let mesh: Mesh | undefined;
let server: FakeLlmServer | undefined;
afterEach(async () => {
  await mesh?.stop();
  mesh = undefined;
  await server?.close();
  server = undefined;
  shellCommands.length = 0;
});

/** A real Catalog and ToolWorker, and a started planner that also takes the children from `runs.submit`. */
async function startMesh(options: Partial<PlannerOptions> = {}, intake = true): Promise<Mesh> {
  const bus = new MemoryBus();
  const catalog = new Catalog({ bus, logger: silentLogger() });
  await catalog.start();
  const worker = new ToolWorker({ bus, tools: [add, digest, shell], logger: silentLogger(), threads: 1 });
  await worker.start();
  const planner = new Planner({ bus, logger: silentLogger(), plannerId: 'planner-sub', ...options });
  if (intake) await planner.start();
  const seen: RunEvent[] = [];
  const waiters: { test: (e: RunEvent) => boolean; resolve: (e: RunEvent) => void }[] = [];
  bus.subscribe('agentmesh.runs.*.events', (msg) => {
    const e = JSON.parse(msg.text()) as RunEvent;
    seen.push(e);
    for (const w of waiters.splice(0))
      if (w.test(e)) w.resolve(e);
      else waiters.push(w);
  });
  const submitted: RunRequest[] = [];
  bus.subscribe('agentmesh.runs.submit', (msg) => void submitted.push(JSON.parse(msg.text()) as RunRequest));
  mesh = {
    bus,
    planner,
    seen,
    submitted,
    next: (test: (e: RunEvent) => boolean) =>
      new Promise<RunEvent>((resolve) => {
        const found = seen.find(test);
        if (found) resolve(found);
        else waiters.push({ test, resolve });
      }),
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
const isFinal = (e: RunEvent): e is RunEventOf<'run.completed'> | RunEventOf<'run.failed'> =>
  e.type === 'run.completed' || e.type === 'run.failed';
/** The child id of one call of a parent, from the parent's agent.started event. */
const childOf = async (m: Mesh, parentId: string, callId: string) =>
  (
    await m.next(
      (e): e is RunEventOf<'agent.started'> =>
        e.type === 'agent.started' && e.run_id === parentId && e.call_id === callId,
    )
  ).child_run_id;

/** A model server answering each run by its task: `reply(task, body)`; a planner whose runs all use it. */
async function startModel(
  reply: (task: string, body: Record<string, any>) => FakeReply,
): Promise<FakeLlmServer> {
  server = await startOpenAiServer((body) => {
    const messages = body['messages'] as { role: string; content: unknown }[];
    const task = messages.find((message) => message.role === 'user')?.content;
    return reply(typeof task === 'string' ? task : JSON.stringify(task), body);
  });
  return server;
}
const modelOptions = (s: FakeLlmServer): Partial<PlannerOptions> => ({
  providers: { baseUrl: s.url, maxRetries: 0, env: {} },
});
/** The tool results the model has seen so far, as text. */
const toolResults = (body: Record<string, any>) =>
  (body['messages'] as { role: string; content: unknown }[])
    .filter((message) => message.role === 'tool')
    .map((message) => String(message.content));
const CHILD_ID = /[A-Za-z0-9_-]+-c[0-9a-f]{32}/;

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
    expect(started.map((e) => e.call_id).sort()).toEqual(['c1', 'c2', 'c3']);
    for (const e of started) expect(e.child_run_id).toMatch(/^parent-three-c[0-9a-f]{32}$/);
    expect(new Set(started.map((e) => e.child_run_id)).size).toBe(3);
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
    const model = await startModel((task, body) => {
      if (task === 'a') return { text: 'answer a' };
      const results = toolResults(body);
      if (results.length === 0)
        return { tool_calls: [{ id: 's1', name: 'agent__spawn', arguments: { task: 'a' } }] };
      if (results.length === 1) {
        const id = CHILD_ID.exec(results[0]!)![0];
        return {
          tool_calls: [
            { id: 'w1', name: 'agent__wait', arguments: { run_ids: [id], timeout_ms: 30_000 } },
            { id: 'l1', name: 'agent__list', arguments: {} },
          ],
        };
      }
      return { text: 'collected' };
    });
    const m = await startMesh(modelOptions(model));
    const { final, events } = await execute(m, { id: 'parent-spawn', task: 'spawn', tools: ['agent'] });
    expect(final).toMatchObject({ status: 'done' });
    const result = (callId: string) =>
      JSON.parse(of(events, 'tool.completed').find((e) => e.call_id === callId)!.preview);
    const [spawned, waited, listed] = [result('s1'), result('w1'), result('l1')];
    expect(spawned).toEqual({ run_id: of(events, 'agent.started')[0]!.child_run_id });
    expect(waited.children[0]).toMatchObject({ run_id: spawned.run_id, status: 'done', text: 'answer a' });
    expect(listed.children[0]).toMatchObject({ run_id: spawned.run_id, task: 'a', call_id: 's1' });
  });

  it('cancelling a parent cancels its child and grandchild', async () => {
    const m = await startMesh();
    const parentId = 'parent-cancel';
    const grandchild = { task: 'wait', script: [{ text: 'too late', delay_ms: 60_000 }] };
    const child = { task: 'child', script: [{ tool_calls: [childCall('g1', grandchild)] }, { text: 'x' }] };
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
    const grandchildId = await childOf(m, await childOf(m, parentId, 'c1'), 'g1');
    await m.next((e) => e.run_id === grandchildId && e.type === 'llm.request');
    const cancelledAt = performance.now();
    controller.abort(new Error('user'));
    const final = await m.next((e) => e.run_id === grandchildId && isFinal(e));
    const elapsed = performance.now() - cancelledAt;
    expect(final).toMatchObject({ type: 'run.completed', status: 'cancelled' });
    expect(elapsed).toBeLessThan(2_000);
    expect((await parent).final).toMatchObject({ status: 'cancelled' });
  });

  it('agent.cancel stops a spawned child, agent.send_input reaches it, and a parent ending cancels the rest', async () => {
    const model = await startModel((task, body) => {
      if (task === 'one' || task === 'two') return { hang: true };
      const results = toolResults(body);
      if (results.length === 0)
        return {
          tool_calls: [
            { id: 's1', name: 'agent__spawn', arguments: { task: 'one' } },
            { id: 's2', name: 'agent__spawn', arguments: { task: 'two' } },
          ],
        };
      const first = CHILD_ID.exec(results[0]!)![0];
      if (results.length === 2)
        return {
          tool_calls: [
            { id: 'i1', name: 'agent__send_input', arguments: { run_id: first, text: 'hurry' } },
            { id: 'x1', name: 'agent__cancel', arguments: { run_id: first } },
            { id: 'x2', name: 'agent__cancel', arguments: { run_id: 'someone-else' } },
          ],
        };
      if (results.length === 5)
        return {
          tool_calls: [
            { id: 'w1', name: 'agent__wait', arguments: { run_ids: [first], timeout_ms: 30_000 } },
          ],
        };
      return { text: 'leaving the second child behind' };
    });
    const m = await startMesh(modelOptions(model));
    const inputs: string[] = [];
    m.bus.subscribe('agentmesh.runs.*.input', (msg) => void inputs.push(`${msg.subject} ${msg.text()}`));
    const { final, events } = await execute(m, { id: 'parent-steer', task: 'steer', tools: ['agent'] });
    expect(final).toMatchObject({ status: 'done' });
    const first = of(events, 'agent.started').find((e) => e.call_id === 's1')!.child_run_id;
    const second = of(events, 'agent.started').find((e) => e.call_id === 's2')!.child_run_id;
    expect(inputs).toEqual([`agentmesh.runs.${first}.input ${JSON.stringify({ text: 'hurry' })}`]);
    const failed = of(events, 'tool.failed');
    expect(failed.map((e) => [e.call_id, e.error.code])).toEqual([['x2', 'not_found']]);
    const waited = JSON.parse(of(events, 'tool.completed').find((e) => e.call_id === 'w1')!.preview);
    expect(waited.children[0]).toMatchObject({ run_id: first, status: 'cancelled' });
    // the second child was still running when the parent ended: it is cancelled too
    expect(await m.next((e) => e.run_id === second && isFinal(e))).toMatchObject({
      type: 'run.completed',
      status: 'cancelled',
    });
    expect(await m.next((e) => e.run_id === first && isFinal(e))).toMatchObject({ status: 'cancelled' });
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

describe('what a child run may not do that its parent may not', () => {
  it("inherits the parent's approvals: a child's shell call waits for a decision", async () => {
    const m = await startMesh({ approvals: true });
    const child = {
      task: 'clean up',
      approvals: { require: ['math.add'] },
      script: [
        { tool_calls: [{ name: 'shell__run_command', arguments: { command: 'rm -rf /' } }] },
        { text: 'cleaned' },
      ],
    };
    const parent = execute(m, {
      id: 'parent-gated',
      task: 'gated',
      tools: ['agent', 'shell'],
      approvals: { require: ['shell.*'], timeout_ms: 60_000 },
      script: [{ tool_calls: [childCall('c1', child)] }, { text: 'done' }],
    });
    const first = await m.next(
      (e) =>
        e.run_id !== 'parent-gated' &&
        (e.type === 'approval.requested' || (e.type === 'tool.started' && e.name === 'shell.run_command')),
    );
    expect(first).toMatchObject({ type: 'approval.requested', name: 'shell.run_command' });
    expect(shellCommands).toEqual([]);
    const request = m.submitted.find((r) => r.id === first.run_id)!;
    expect(request.approvals).toEqual({ require: ['shell.*', 'math.add'], timeout_ms: 60_000 });
    if (first.type !== 'approval.requested') throw new Error('expected approval.requested');
    await sendApprovalDecision(m.bus, first.run_id, { approval_id: first.approval_id, decision: 'deny' });
    const { final } = await parent;
    expect(final).toMatchObject({ status: 'done' });
    expect(shellCommands).toEqual([]);
  });

  it("inherits the parent's guardrails: a child's secret comes back redacted, its blocked call never runs", async () => {
    const m = await startMesh();
    const child = {
      task: 'leak',
      script: [
        { tool_calls: [{ name: 'shell__run_command', arguments: { command: 'git push --force' } }] },
        { deltas: ['the key is SEC', 'RET_42'] },
      ],
    };
    const { final } = await execute(m, {
      id: 'parent-guarded',
      task: 'guarded',
      tools: ['agent', 'shell'],
      guardrails: {
        output: [{ name: 'no-secrets', pattern: 'SECRET_[0-9]+', action: 'redact' }],
        tools: [{ name: 'no-force', tool: 'shell.*', args_pattern: '--force', action: 'block' }],
      },
      script: [{ tool_calls: [childCall('c1', child)] }, { text: 'done' }],
    });
    expect(final).toMatchObject({ status: 'done' });
    expect(shellCommands).toEqual([]);
    const childEvents = m.seen.filter((e) => e.run_id !== 'parent-guarded');
    expect(childEvents.find((e) => e.type === 'run.completed')).toMatchObject({
      text: 'the key is [redacted:no-secrets]',
    });
    expect(JSON.stringify(m.seen)).not.toContain('SECRET_42"');
  });

  it('refuses script in agent.run when the parent is not scripted', async () => {
    const model = await startModel((_task, body) =>
      toolResults(body).length === 0
        ? {
            tool_calls: [
              {
                id: 'c1',
                name: 'agent__run',
                arguments: { task: 'check the build', script: [{ text: 'all green, ship it' }] },
              },
            ],
          }
        : { text: 'the child could not be scripted' },
    );
    const m = await startMesh(modelOptions(model));
    const { final, events } = await execute(m, { id: 'parent-real', task: 'build', tools: ['agent'] });
    expect(final).toMatchObject({ status: 'done' });
    const failed = of(events, 'tool.failed');
    expect(failed.map((e) => e.error.code)).toEqual(['permission_denied']);
    expect(failed[0]!.error.message).toMatch(/script is refused: only a run on the scripted provider/);
    expect(of(events, 'agent.started')).toHaveLength(0);
    expect(m.submitted).toHaveLength(0);
    expect(JSON.stringify(model.requests)).not.toContain('ship it"}]');
  });

  it("caps a child's max_iterations and tool_concurrency at the parent's", async () => {
    const m = await startMesh();
    const turn = { tool_calls: [{ name: 'math.add', arguments: { a: 1, b: 1 } }] };
    const { final, events } = await execute(m, {
      id: 'parent-capped',
      task: 'capped',
      tools: ['agent', 'math'],
      limits: { max_iterations: 3, tool_concurrency: 2 },
      script: [
        {
          tool_calls: [
            childCall('c1', {
              task: 'greedy',
              limits: { max_iterations: 50, tool_concurrency: 64 },
              script: [turn, turn, turn, turn, turn, { text: 'greedy done' }],
            }),
            childCall('c2', { task: 'modest', script: [{ text: 'modest done' }] }),
          ],
        },
        { text: 'done' },
      ],
    });
    expect(final).toMatchObject({ status: 'done' });
    const limits = Object.fromEntries(m.submitted.map((r) => [r.task, r.limits]));
    expect(limits['greedy']).toMatchObject({ max_iterations: 3, tool_concurrency: 2 });
    expect(limits['modest']).toMatchObject({ max_iterations: 3, tool_concurrency: 2 });
    const failed = of(events, 'tool.failed').find((e) => e.call_id === 'c1');
    expect(failed?.error).toMatchObject({ code: 'child_failed' });
    expect(failed?.error.message).toMatch(/budget_exhausted: max_iterations \(3\) reached/);
  });

  it('salts child ids with the checkpointed salt: the old predictable id is not the child', async () => {
    const snapshots: RunSnapshot[] = [];
    const m = await startMesh({ checkpoint: (s) => void snapshots.push(structuredClone(s as RunSnapshot)) });
    const predictable = childRunId('parent-salted', 1, 'c1');
    const squatter = submitRun(m.bus, {
      id: predictable,
      task: 'squat',
      script: [{ text: 'SQUATTED', delay_ms: 1_000 }],
    });
    await m.next((e) => e.run_id === predictable && e.type === 'llm.request');
    const { final, events } = await execute(m, {
      id: 'parent-salted',
      task: 'salted',
      tools: ['agent'],
      script: [
        { tool_calls: [childCall('c1', { task: 'real', script: [{ text: 'real answer' }] })] },
        { text: 'ok' },
      ],
    });
    await squatter;
    expect(final).toMatchObject({ status: 'done' });
    expect(of(events, 'tool.completed').map((e) => e.preview)).toEqual(['real answer']);
    const id = of(events, 'agent.started')[0]!.child_run_id;
    expect(id).not.toBe(predictable);
    const salt = snapshots.find(
      (s) => s.run_id === 'parent-salted' && s.child_salt !== undefined,
    )?.child_salt;
    expect(salt).toMatch(/^[0-9a-f]{32}$/);
    expect(id).toBe(childRunId('parent-salted', 1, 'c1', salt));
  });

  it('refuses a child whose run record names another parent, without reading its answer', async () => {
    const m = await startMesh({}, false);
    // a rogue taker of runs.submit: it runs the child id itself, under a parent that is not the one that asked
    m.bus.subscribe('agentmesh.runs.submit', (msg) => {
      const request = JSON.parse(msg.text()) as RunRequest;
      respondJson(m.bus, msg, { run_id: request.id });
      void m.planner
        .execute({
          ...request,
          script: [{ text: 'SQUATTED' }],
          parent: { ...request.parent!, run_id: 'someone-else' },
        })
        .catch(() => undefined);
    });
    const { final, events } = await execute(m, {
      id: 'parent-wronged',
      task: 'wronged',
      tools: ['agent'],
      script: [
        { tool_calls: [childCall('c1', { task: 'real', script: [{ text: 'real answer' }] })] },
        { text: 'ok' },
      ],
    });
    expect(final).toMatchObject({ status: 'done' });
    const id = of(events, 'agent.started')[0]!.child_run_id;
    expect(await m.next((e) => e.run_id === id && isFinal(e))).toMatchObject({ text: 'SQUATTED' });
    const failed = of(events, 'tool.failed');
    expect(failed.map((e) => e.error.code)).toEqual(['permission_denied']);
    expect(failed[0]!.error.message).toBe(
      `run ${id} is not a child of run parent-wronged: its run record names parent someone-else; its answer is not read`,
    );
    expect(of(events, 'tool.completed')).toHaveLength(0);
    expect(of(events, 'agent.completed')).toMatchObject([{ call_id: 'c1', status: 'failed' }]);
    if (final.type !== 'run.completed') throw new Error('expected run.completed');
    expect(final.usage.children ?? []).toEqual([]);
  });
});
