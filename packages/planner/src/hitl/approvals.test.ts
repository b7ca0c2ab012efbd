import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  MemoryBus,
  encodeJson,
  runControlSubjects,
  silentLogger,
  type RunEvent,
  type RunRequestInput,
} from '@agentmesh/protocol';
import { Catalog } from '@agentmesh/catalog';
import { ToolWorker, defineTool } from '@agentmesh/tool-worker';
import { Planner, type PlannerOptions } from '../planner.js';
import { openRunRecords } from '../infra/backend.js';
import { parseRecord } from '../model/record.js';
import { sendApprovalDecision } from './approval-service.js';
import { sendRunControl } from './run-controls.js';
import type { RunSnapshot } from '../model/snapshot.js';

const written: string[] = [];
const write = defineTool({
  name: 'test.write',
  description: 'Writes a file.',
  input: z.object({ path: z.string(), token: z.string().optional() }),
  handler: ({ path }) => {
    written.push(path);
    return `wrote ${path}`;
  },
});
const add = defineTool({
  name: 'math.add',
  description: 'Adds.',
  input: z.object({ a: z.number(), b: z.number() }),
  idempotent: true,
  handler: ({ a, b }) => a + b,
});

let stop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
  written.length = 0;
});

async function mesh(options: Partial<PlannerOptions> = {}) {
  const bus = new MemoryBus();
  const catalog = new Catalog({ bus, logger: silentLogger() });
  await catalog.start();
  const worker = new ToolWorker({ bus, tools: [write, add], logger: silentLogger(), threads: 1 });
  await worker.start();
  const planner = new Planner({ bus, logger: silentLogger(), approvals: true, ...options });
  await planner.start();
  stop = async () => {
    await planner.drain();
    await worker.drain();
    await catalog.stop();
    await bus.close();
  };
  return { bus, planner };
}

/** Starts a run; `requested` resolves with each approval.requested event as it comes. */
function start(planner: Planner, request: RunRequestInput) {
  const events: RunEvent[] = [];
  const waiters: ((e: RunEvent) => void)[] = [];
  const queued: RunEvent[] = [];
  const done = planner.execute(request, {
    onEvent: (e) => {
      events.push(e);
      if (e.type !== 'approval.requested') return;
      const w = waiters.shift();
      if (w) w(e);
      else queued.push(e);
    },
  });
  const requested = () =>
    new Promise<Extract<RunEvent, { type: 'approval.requested' }>>((resolve) => {
      const e = queued.shift();
      if (e) resolve(e as Extract<RunEvent, { type: 'approval.requested' }>);
      else waiters.push(resolve as (e: RunEvent) => void);
    });
  return { events, done, requested };
}

const writeCall = (path: string, id?: string) => ({
  ...(id === undefined ? {} : { id }),
  name: 'test__write',
  arguments: { path, token: 'hunter2' },
});
const script = (path = 'a.txt') => [
  { tool_calls: [writeCall(path), { name: 'math__add', arguments: { a: 2, b: 3 } }] },
  { text: 'finished' },
];

describe('approvals (planner, in-process bus)', () => {
  it('a call waits for approval while the other call of its turn runs; approve runs it', async () => {
    const { bus, planner } = await mesh();
    const run = start(planner, {
      id: 'ap-approve',
      task: 'write',
      approvals: { require: ['test.write'] },
      script: script(),
    });
    const req = await run.requested();
    expect(req).toMatchObject({ name: 'test.write', args: { path: 'a.txt' } });
    expect(req.summary).toContain('test.write');
    const records = await openRunRecords(bus);
    await expect
      .poll(async () => parseRecord((await records.get('ap-approve'))!.value).waiting, { timeout: 10_000 })
      .toBe('awaiting_approval');
    await expect
      .poll(() => run.events.some((e) => e.type === 'tool.completed' && e.name === 'math.add'), {
        timeout: 10_000,
      })
      .toBe(true);
    expect(written).toEqual([]);
    await sendApprovalDecision(bus, 'ap-approve', {
      approval_id: req.approval_id,
      decision: 'approve',
      by: 'ann',
    });
    const final = await run.done;
    expect(final).toMatchObject({ status: 'done', tool_calls: 2 });
    expect(written).toEqual(['a.txt']);
    expect(run.events.find((e) => e.type === 'approval.decided')).toMatchObject({
      approval_id: req.approval_id,
      decision: 'approve',
      by: 'ann',
    });
    const record = parseRecord((await records.get('ap-approve'))!.value);
    expect(record.waiting).toBeUndefined();
  });

  it('deny: the model gets a tool error naming the denial and its reason; the loop goes on', async () => {
    const { bus, planner } = await mesh({ defaults: { approvals: { require: ['test.*'] } } });
    const run = start(planner, { id: 'ap-deny', task: 'write', script: script() });
    const req = await run.requested();
    await sendApprovalDecision(bus, 'ap-deny', {
      approval_id: req.approval_id,
      decision: 'deny',
      reason: 'not on a Friday',
      by: 'bob',
    });
    const final = await run.done;
    expect(final).toMatchObject({ status: 'done', text: 'finished' });
    expect(written).toEqual([]);
    const failed = run.events.find((e) => e.type === 'tool.failed');
    expect(failed).toMatchObject({ name: 'test.write', error: { code: 'approval_denied' } });
    expect(failed?.type === 'tool.failed' && failed.error.message).toContain(
      'denied by bob: not on a Friday',
    );
  });

  it('timeout_ms ends a pending approval as denied with reason timeout', async () => {
    const { planner } = await mesh();
    const run = start(planner, {
      id: 'ap-timeout',
      task: 'write',
      approvals: { require: ['test.write'], timeout_ms: 200 },
      script: script(),
    });
    const final = await run.done;
    expect(final).toMatchObject({ status: 'done' });
    expect(run.events.find((e) => e.type === 'approval.decided')).toMatchObject({
      decision: 'deny',
      reason: 'timeout',
    });
    expect(written).toEqual([]);
  });

  it('two racing decisions: exactly one wins, the other is already_decided', async () => {
    const { bus, planner } = await mesh();
    const run = start(planner, {
      id: 'ap-race',
      task: 'write',
      approvals: { require: ['test.write'] },
      script: script(),
    });
    const req = await run.requested();
    const results = await Promise.allSettled([
      sendApprovalDecision(bus, 'ap-race', { approval_id: req.approval_id, decision: 'approve', by: 'a' }),
      sendApprovalDecision(bus, 'ap-race', { approval_id: req.approval_id, decision: 'deny', by: 'b' }),
    ]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    const lost = results.find((r) => r.status === 'rejected');
    expect(lost?.status === 'rejected' && lost.reason).toMatchObject({ code: 'already_decided' });
    await run.done;
    const decided = run.events.filter((e) => e.type === 'approval.decided');
    expect(decided).toHaveLength(1);
  });

  it('a request cannot remove a configured requirement', async () => {
    const { bus, planner } = await mesh({ defaults: { approvals: { require: ['test.write'] } } });
    const run = start(planner, {
      id: 'ap-narrow',
      task: 'write',
      approvals: { auto_approve: ['test.write'] },
      script: script(),
    });
    const req = await run.requested();
    await sendApprovalDecision(bus, 'ap-narrow', { approval_id: req.approval_id, decision: 'approve' });
    expect(await run.done).toMatchObject({ status: 'done' });
  });

  it('bad input: unknown approval id, malformed payload, a decision on a finished run', async () => {
    const { bus, planner } = await mesh();
    const run = start(planner, {
      id: 'ap-bad',
      task: 'write',
      approvals: { require: ['test.write'] },
      script: script(),
    });
    const req = await run.requested();
    await expect(
      sendApprovalDecision(bus, 'ap-bad', { approval_id: 'ap_nope', decision: 'approve' }),
    ).rejects.toMatchObject({ code: 'not_found' });
    const malformed = await bus.request(
      runControlSubjects().approve('ap-bad'),
      encodeJson({ approval_id: req.approval_id, decision: 'maybe' }),
    );
    expect(malformed.text()).toContain('invalid_message');
    await sendApprovalDecision(bus, 'ap-bad', { approval_id: req.approval_id, decision: 'approve' });
    await run.done;
    await expect(
      sendApprovalDecision(bus, 'ap-bad', { approval_id: req.approval_id, decision: 'deny' }),
    ).rejects.toMatchObject({ code: 'run_finished' });
  });
});

describe('input and pause/resume (planner, in-process bus)', () => {
  it('a paused run holds before its model turn; input is added as a user message; resume releases it', async () => {
    const snapshots: RunSnapshot[] = [];
    const { bus, planner } = await mesh({ checkpoint: (s) => void snapshots.push(structuredClone(s)) });
    await sendRunControl(bus, 'ctl-1', { kind: 'pause' });
    const events: RunEvent[] = [];
    let paused: () => void = () => undefined;
    const pausedSeen = new Promise<void>((resolve) => (paused = resolve));
    const done = planner.execute(
      {
        id: 'ctl-1',
        task: 'add',
        script: [{ tool_calls: [{ name: 'math__add', arguments: { a: 1, b: 2 } }] }, { text: 'ok' }],
      },
      {
        onEvent: (e) => {
          events.push(e);
          if (e.type === 'run.paused') paused();
        },
      },
    );
    await pausedSeen;
    const records = await openRunRecords(bus);
    await expect
      .poll(async () => parseRecord((await records.get('ctl-1'))!.value).waiting, { timeout: 10_000 })
      .toBe('paused');
    expect(events.some((e) => e.type === 'llm.request')).toBe(false);
    await sendRunControl(bus, 'ctl-1', { kind: 'input', text: 'also say hi' });
    await sendRunControl(bus, 'ctl-1', { kind: 'resume' });
    expect(await done).toMatchObject({ status: 'done' });
    const order = events
      .map((e) => e.type)
      .filter((t) => ['run.paused', 'run.resumed', 'run.input', 'llm.request'].includes(t));
    expect(order.slice(0, 4)).toEqual(['run.paused', 'run.resumed', 'run.input', 'llm.request']);
    expect(events.filter((e) => e.type === 'run.input')).toHaveLength(1);
    const last = snapshots.at(-1)!;
    expect(last.messages.filter((m) => m.role === 'user').map((m) => m.content)).toContain('also say hi');
    expect(parseRecord((await records.get('ctl-1'))!.value).waiting).toBeUndefined();
  });

  it('input to a finished run is refused with run_finished; a malformed input with invalid_message', async () => {
    const { bus, planner } = await mesh();
    await planner.execute({ id: 'ctl-2', task: 't', script: [{ text: 'ok' }] });
    await expect(sendRunControl(bus, 'ctl-2', { kind: 'input', text: 'late' })).rejects.toMatchObject({
      code: 'run_finished',
    });
    const reply = await bus.request(runControlSubjects().input('ctl-3'), encodeJson({ txt: 'x' }));
    expect(reply.text()).toContain('invalid_message');
  });
});
