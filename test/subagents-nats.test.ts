import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { NatsBus, subjects, type RunEvent, type RunEventOf } from '@agentmesh/protocol';
import { childRunId, runTree, submitRun } from '@agentmesh/planner';
import { runAgentmesh } from './helpers/cli.js';
import { calcTool, sha256Tool, startFakeMesh, type FakeMesh } from './fixtures/llm/mesh.js';
import { dropPrefix, uniquePrefix } from './fixtures/llm/nats.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const natsUrl = inject('natsUrl');
const prefix = uniquePrefix('sub');
const s = subjects(prefix);
const processes: ChildProcess[] = [];
let bus: NatsBus;
let mesh: FakeMesh;
/** Every event of every run under the prefix, by run id, in arrival order. */
const events = new Map<string, RunEvent[]>();
const waiters: { test: (e: RunEvent) => boolean; resolve: (e: RunEvent) => void }[] = [];

const plannerProcesses = new Map<string, ChildProcess>();

function startPlanner(id: string, maxRuns = 2): Promise<void> {
  const child = spawn(
    process.execPath,
    [fileURLToPath(new URL('./fixtures/llm/subagent-planner-process.mjs', import.meta.url))],
    {
      cwd: root,
      env: {
        ...process.env,
        NATS_URL: natsUrl,
        AGENTMESH_PREFIX: prefix,
        PLANNER_ID: id,
        LOG_LEVEL: 'warn',
        // two runs at a time: a parent and one child here, so three children must spread over both planners
        MAX_RUNS: String(maxRuns),
        LEASE_MS: '2000',
        SUBAGENTS: JSON.stringify({ max_depth: 2, max_children: 3 }),
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  processes.push(child);
  plannerProcesses.set(id, child);
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('ready')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`planner ${id} exited with ${code} before it was ready`)));
  });
}

/** The first event (already seen or still to come) that passes `test`. */
function eventWhere(test: (e: RunEvent) => boolean, timeoutMs = 30_000): Promise<RunEvent> {
  for (const list of events.values()) {
    const found = list.find(test);
    if (found) return Promise.resolve(found);
  }
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no such event in time')), timeoutMs);
    waiters.push({
      test,
      resolve: (e) => {
        clearTimeout(timer);
        resolve(e);
      },
    });
  });
}

const finalOf = (runId: string) =>
  eventWhere((e) => e.run_id === runId && (e.type === 'run.completed' || e.type === 'run.failed')) as Promise<
    RunEventOf<'run.completed'>
  >;
const of = <T extends RunEvent['type']>(runId: string, type: T) =>
  (events.get(runId) ?? []).filter((e): e is RunEventOf<T> => e.type === type);
const agentRun = (id: string, args: Record<string, unknown>) => ({ id, name: 'agent__run', arguments: args });
/** The child id of one call of a parent, from the parent's agent.started event. */
const childOf = async (parentId: string, callId: string) =>
  (
    (await eventWhere(
      (e) => e.run_id === parentId && e.type === 'agent.started' && e.call_id === callId,
    )) as RunEventOf<'agent.started'>
  ).child_run_id;

beforeAll(async () => {
  bus = await NatsBus.connect(natsUrl);
  mesh = startFakeMesh(bus, [calcTool, sha256Tool], { prefix });
  bus.subscribe(s.allRunEvents, (msg) => {
    const e = JSON.parse(msg.text()) as RunEvent;
    events.set(e.run_id, [...(events.get(e.run_id) ?? []), e]);
    for (const w of waiters.splice(0))
      if (w.test(e)) w.resolve(e);
      else waiters.push(w);
  });
  await bus.flush();
  await Promise.all([startPlanner('planner-a'), startPlanner('planner-b')]);
}, 60_000);

afterAll(async () => {
  await Promise.all(
    processes.map(
      (c) =>
        new Promise<void>((resolve) => {
          if (c.exitCode !== null || c.signalCode !== null) return resolve();
          const kill = setTimeout(() => c.kill('SIGKILL'), 5_000);
          c.once('exit', () => {
            clearTimeout(kill);
            resolve();
          });
          c.kill('SIGTERM');
        }),
    ),
  );
  mesh?.stop();
  if (bus) {
    await dropPrefix(bus, prefix);
    await bus.close();
  }
});

describe('sub-agents across two planner processes', () => {
  it('runs three children of one turn on both planners and rolls their usage into the parent', async () => {
    const child = (n: number) =>
      agentRun(`c${n}`, {
        task: `add ${n}`,
        tools: ['math'],
        script: [
          {
            tool_calls: [{ name: 'math__calc', arguments: { lhs: n, rhs: n, op: 'add' } }],
            usage: { input_tokens: 10, output_tokens: 1 },
            delay_ms: 300,
          },
          { text: `${n}+${n}=${2 * n}`, usage: { input_tokens: 20, output_tokens: 2 } },
        ],
      });
    await submitRun(
      bus,
      {
        id: 'fan-parent',
        task: 'fan out',
        tools: ['agent', 'math'],
        script: [
          { tool_calls: [child(1), child(2), child(3)], usage: { input_tokens: 100, output_tokens: 10 } },
          { text: 'gathered', usage: { input_tokens: 100, output_tokens: 10 } },
        ],
      },
      { prefix },
    );
    const final = await finalOf('fan-parent');
    expect(final).toMatchObject({ type: 'run.completed', status: 'done', text: 'gathered' });
    const ids = [...new Set(of('fan-parent', 'agent.started').map((e) => e.child_run_id))];
    expect(ids).toHaveLength(3);
    for (const id of ids) expect(id).toMatch(/^fan-parent-c[0-9a-f]{32}$/);
    const planners = new Set<string>();
    for (const id of ids) {
      const started = of(id, 'run.started');
      expect(started).toHaveLength(1);
      planners.add(started[0]!.planner_id);
    }
    expect([...planners].sort()).toEqual(['planner-a', 'planner-b']);
    expect(
      of('fan-parent', 'tool.completed')
        .map((e) => e.preview)
        .sort(),
    ).toEqual(['1+1=2', '2+2=4', '3+3=6']);
    expect(of('fan-parent', 'agent.completed').map((e) => e.status)).toEqual(['done', 'done', 'done']);
    expect(final.usage).toMatchObject({ input_tokens: 200 + 3 * 30, output_tokens: 20 + 3 * 3 });
    expect(final.usage.children?.map((c) => c.run_id).sort()).toEqual([...ids].sort());

    const tree = await runTree(bus, 'fan-parent', { prefix });
    expect(tree).toMatchObject({ run_id: 'fan-parent', status: 'done', task: 'fan out' });
    expect(tree.children.map((c) => [c.run_id, c.status])).toEqual(ids.map((id) => [id, 'done']));
    expect(tree.children.every((c) => typeof c.duration_ms === 'number' && c.duration_ms >= 0)).toBe(true);
    const shown = await runAgentmesh(['runs', 'show', 'fan-parent', '--nats', natsUrl, '--prefix', prefix]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(
      /tree:\nfan-parent {2}done {2}[\d.]+ s( {2}\$[\d.]+)? {2}\(planner-[ab]\) {2}fan out/,
    );
    for (const id of ids) expect(shown.stdout).toMatch(new RegExp(`[├└]─ ${id} {2}done {2}[\\d.]+ s`));
  });

  it('refuses a child asking for tools outside its parent allow-list', async () => {
    await submitRun(
      bus,
      {
        id: 'narrow-parent',
        task: 'narrow',
        tools: ['agent', 'math'],
        script: [
          {
            tool_calls: [agentRun('c1', { task: 'hash', tools: ['crypto.sha256'], script: [{ text: 'x' }] })],
          },
          { text: 'could not' },
        ],
      },
      { prefix },
    );
    await finalOf('narrow-parent');
    const failed = of('narrow-parent', 'tool.failed')[0];
    expect(failed?.error).toMatchObject({ code: 'tools_not_allowed' });
    expect(failed?.error.message).toMatch(/allowed: agent, math/);
  });

  it('refuses a child beyond max_depth and beyond max_children', async () => {
    const leaf = { task: 'leaf', script: [{ text: 'leaf' }] };
    const grandchild = { task: 'g', script: [{ tool_calls: [agentRun('d1', leaf)] }, { text: 'g done' }] };
    const childSpec = {
      task: 'c',
      script: [{ tool_calls: [agentRun('g1', grandchild)] }, { text: 'c done' }],
    };
    await submitRun(
      bus,
      {
        id: 'deep-parent',
        task: 'deep',
        tools: ['agent'],
        script: [{ tool_calls: [agentRun('c1', childSpec)] }, { text: 'deep done' }],
      },
      { prefix },
    );
    expect(await finalOf('deep-parent')).toMatchObject({ status: 'done' });
    const grandchildId = await childOf(await childOf('deep-parent', 'c1'), 'g1');
    expect(of(grandchildId, 'tool.failed')[0]?.error).toMatchObject({ code: 'depth_exceeded' });

    const trivial = (n: number) => agentRun(`f${n}`, { task: `t${n}`, script: [{ text: `t${n}` }] });
    await submitRun(
      bus,
      {
        id: 'wide-parent',
        task: 'wide',
        tools: ['agent'],
        script: [{ tool_calls: [trivial(1), trivial(2), trivial(3), trivial(4)] }, { text: 'wide done' }],
      },
      { prefix },
    );
    expect(await finalOf('wide-parent')).toMatchObject({ status: 'done' });
    expect(of('wide-parent', 'tool.failed').map((e) => e.error.code)).toEqual(['too_many_children']);
    expect(of('wide-parent', 'agent.completed')).toHaveLength(3);
  });

  it('a cancelled parent cancels its grandchild within 200 ms', async () => {
    const parentId = 'cancel-parent';
    const grandchild = { task: 'wait', script: [{ text: 'late', delay_ms: 120_000 }] };
    const childSpec = { task: 'c', script: [{ tool_calls: [agentRun('g1', grandchild)] }, { text: 'x' }] };
    await submitRun(
      bus,
      {
        id: parentId,
        task: 'cancel',
        tools: ['agent'],
        script: [{ tool_calls: [agentRun('c1', childSpec)] }],
      },
      { prefix },
    );
    const childId = await childOf(parentId, 'c1');
    const grandchildId = await childOf(childId, 'g1');
    await eventWhere((e) => e.run_id === grandchildId && e.type === 'llm.request');
    const grandFinal = finalOf(grandchildId);
    const cancelledAt = performance.now();
    bus.publish(s.runCancel(parentId), JSON.stringify({ reason: 'test' }));
    const final = await grandFinal;
    const elapsed = performance.now() - cancelledAt;
    expect(final).toMatchObject({ type: 'run.completed', status: 'cancelled' });
    expect(elapsed).toBeLessThanOrEqual(200);
    expect(await finalOf(parentId)).toMatchObject({ status: 'cancelled' });
    expect(await finalOf(childId)).toMatchObject({ status: 'cancelled' });
  });

  it('a planner killed mid-way: the parent resumes elsewhere and re-attaches, no child runs twice', async () => {
    await startPlanner('planner-c', 8);
    const parentId = 'kill-parent';
    const child = (n: number) =>
      agentRun(`k${n}`, {
        task: `slow ${n}`,
        script: [
          {
            text: '',
            tool_calls: [{ name: 'math__calc', arguments: { lhs: n, rhs: 1, op: 'add' } }],
            delay_ms: 2_500,
          },
          { text: `slow ${n} done` },
        ],
      });
    await submitRun(
      bus,
      {
        id: parentId,
        task: 'survive',
        tools: ['agent', 'math'],
        script: [{ tool_calls: [child(1), child(2), child(3)] }, { text: 'survived' }],
      },
      { prefix },
    );
    const ids = await Promise.all([1, 2, 3].map((n) => childOf(parentId, `k${n}`)));
    await Promise.all(ids.map((id) => eventWhere((e) => e.run_id === id && e.type === 'llm.request')));
    const owner = of(parentId, 'run.started')[0]!.planner_id;
    plannerProcesses.get(owner)!.kill('SIGKILL');
    const final = await finalOf(parentId);
    expect(final).toMatchObject({ status: 'done', text: 'survived' });
    expect(of(parentId, 'run.started').some((e) => e.resumed === true && e.planner_id !== owner)).toBe(true);
    for (const id of ids) {
      expect(await finalOf(id)).toMatchObject({ status: 'done' });
      // each child was accepted once: re-attaching found it, a resumed child continued from its checkpoint
      expect(of(id, 'run.accepted')).toHaveLength(1);
      expect(of(id, 'run.started').filter((e) => e.resumed !== true)).toHaveLength(1);
    }
    expect(
      of(parentId, 'tool.completed')
        .map((e) => e.preview)
        .sort(),
    ).toEqual(['slow 1 done', 'slow 2 done', 'slow 3 done']);
    expect(final.usage.children?.map((c) => c.run_id).sort()).toEqual([...ids].sort());
  }, 90_000);

  it('a squatter on the old predictable child id is not read: the child id carries the salt', async () => {
    const parentId = 'squat-parent';
    const predictable = childRunId(parentId, 1, 'c1');
    await submitRun(bus, { id: predictable, task: 'squat', script: [{ text: 'SQUATTED' }] }, { prefix });
    expect(await finalOf(predictable)).toMatchObject({ status: 'done', text: 'SQUATTED' });
    await submitRun(
      bus,
      {
        id: parentId,
        task: 'trust my child',
        tools: ['agent'],
        script: [
          { tool_calls: [agentRun('c1', { task: 'real', script: [{ text: 'real answer' }] })] },
          { text: 'ok' },
        ],
      },
      { prefix },
    );
    expect(await finalOf(parentId)).toMatchObject({ status: 'done' });
    const childId = await childOf(parentId, 'c1');
    expect(childId).not.toBe(predictable);
    expect(childId).toMatch(/^squat-parent-c[0-9a-f]{32}$/);
    expect(of(parentId, 'tool.completed').map((e) => e.preview)).toEqual(['real answer']);
    expect(of(parentId, 'agent.completed')).toMatchObject([{ child_run_id: childId, status: 'done' }]);
  });
});
