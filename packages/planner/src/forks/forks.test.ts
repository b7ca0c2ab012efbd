import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { MemoryBus, silentLogger, type RunEvent, type RunRequestInput } from '@agentmesh/protocol';
import { Catalog } from '@agentmesh/catalog';
import { ToolWorker, defineTool } from '@agentmesh/tool-worker';
import { Planner } from '../planner.js';
import { readTranscript } from '../infra/transcripts.js';
import { listForks } from '../infra/run-admin.js';
import { forkRequest } from '../infra/run-client.js';

let executions = 0;
const calc = defineTool({
  name: 'math.add',
  description: 'Adds two numbers.',
  input: z.object({ a: z.number(), b: z.number() }),
  output: z.number(),
  idempotent: true,
  handler: ({ a, b }) => {
    executions++;
    return a + b;
  },
});

const add = (a: number, b: number) => ({ name: 'math__add', arguments: { a, b } });

let bus: MemoryBus;
let planner: Planner;
let stop: () => Promise<void>;

async function execute(request: RunRequestInput) {
  const events: RunEvent[] = [];
  const final = await planner.execute(request, { onEvent: (e) => events.push(e) });
  return { final, events };
}

const endOfTurn = (events: RunEvent[], iteration: number) => {
  const next = events.find((e) => e.type === 'llm.request' && e.iteration === iteration + 1)!;
  return next.seq - 1;
};

beforeAll(async () => {
  bus = new MemoryBus();
  const catalog = new Catalog({ bus, logger: silentLogger() });
  await catalog.start();
  const worker = new ToolWorker({ bus, tools: [calc], logger: silentLogger(), threads: 1 });
  await worker.start();
  planner = new Planner({ bus, logger: silentLogger(), plannerId: 'planner-forks' });
  stop = async () => {
    await planner.drain();
    await worker.drain();
    await catalog.stop();
    await bus.close();
  };
});

afterAll(() => stop());

describe('a fork started in process (Planner.execute with fork)', () => {
  it('starts from the original conversation after turn 1: nothing before it is asked or executed again', async () => {
    const original = await execute({
      id: 'orig-3',
      task: 'add 1 and 2, then 3',
      identity: { tenant: 'acme' },
      script: [{ tool_calls: [add(1, 2)] }, { tool_calls: [add(3, 3)] }, { text: 'six' }],
    });
    expect(original.final).toMatchObject({ status: 'done', text: 'six' });
    expect(executions).toBe(2);
    const before = await readTranscript(bus, 'orig-3');
    const seq = endOfTurn(original.events, 1);
    const request = await forkRequest(bus, {
      runId: 'orig-3',
      seq,
      id: 'fork-3',
      script: [{ tool_calls: [add(10, 20)] }, { text: 'forked: thirty' }],
    });
    expect(request).toMatchObject({ provider: 'scripted', identity: { tenant: 'acme' }, fork: { seq } });
    const fork = await execute(request);
    expect(fork.final).toMatchObject({ status: 'done', text: 'forked: thirty', iterations: 2 });
    expect(fork.events[0]).toMatchObject({
      type: 'run.accepted',
      forked_from: { run_id: 'orig-3', seq },
    });
    expect(fork.events.filter((e) => e.type === 'llm.request')).toHaveLength(2);
    expect(executions).toBe(3);
    const forked = (await readTranscript(bus, 'fork-3'))!;
    expect(forked.messages.slice(0, 3)).toEqual(before!.messages.slice(0, 3));
    expect(forked.messages[2]).toMatchObject({ role: 'tool', content: '3' });
    expect(forked.messages.at(-1)).toMatchObject({ role: 'assistant', content: 'forked: thirty' });
    expect(await readTranscript(bus, 'orig-3')).toEqual(before);
    expect(await listForks(bus, 'orig-3')).toEqual([
      expect.objectContaining({ run_id: 'fork-3', seq, state: 'finished', status: 'done' }),
    ]);
  });

  it("forks a fork: the conversation is the original prefix, then the first fork's own turn", async () => {
    const first = (await readTranscript(bus, 'fork-3'))!;
    const seq = first.events.find((e) => e.type === 'tool.completed')!.seq;
    const request = await forkRequest(bus, {
      runId: 'fork-3',
      seq,
      id: 'fork-of-fork',
      script: [{ text: 'again' }],
    });
    const again = await execute(request);
    expect(again.final).toMatchObject({ status: 'done', text: 'again' });
    const messages = (await readTranscript(bus, 'fork-of-fork'))!.messages;
    expect(messages.slice(0, 5)).toEqual(first.messages.slice(0, 5));
    expect(messages.map((m) => m.role)).toEqual([
      'user',
      'assistant',
      'tool',
      'assistant',
      'tool',
      'assistant',
    ]);
    expect(messages[4]).toMatchObject({ role: 'tool', content: '30' });
  });

  it("refuses another tenant's run as not_found, with the message of a run that does not exist", async () => {
    const seq = 4;
    const other = await execute({
      id: 'fork-other-tenant',
      task: 'steal',
      identity: { tenant: 'evil' },
      script: [{ text: 'x' }],
      fork: { run_id: 'orig-3', seq },
    });
    const missing = await execute({
      id: 'fork-missing',
      task: 'nothing',
      identity: { tenant: 'evil' },
      script: [{ text: 'x' }],
      fork: { run_id: 'no-such-run', seq },
    });
    expect(other.final).toMatchObject({ type: 'run.failed', error: { code: 'not_found' } });
    expect(missing.final).toMatchObject({ type: 'run.failed', error: { code: 'not_found' } });
    const text = (e: RunEvent) => (e.type === 'run.failed' ? e.error.message : '');
    expect(text(other.final).replace('orig-3', 'X')).toBe(text(missing.final).replace('no-such-run', 'X'));
    expect(other.events.some((e) => e.type === 'llm.request')).toBe(false);
  });

  it('refuses a seq inside a turn whose calls had not finished, and a fork that continues a session', async () => {
    const inside = await execute({
      id: 'fork-inside',
      task: 'x',
      identity: { tenant: 'acme' },
      script: [{ text: 'x' }],
      fork: { run_id: 'orig-3', seq: 4 },
    });
    expect(inside.final).toMatchObject({ type: 'run.failed', error: { code: 'invalid_request' } });
    expect(inside.final.type === 'run.failed' && inside.final.error.message).toMatch(
      /tool calls had not all finished/,
    );
    const session = await execute({
      id: 'fork-session',
      task: 'x',
      identity: { tenant: 'acme' },
      session: 's1',
      script: [{ text: 'x' }],
      fork: { run_id: 'orig-3', seq: 2 },
    });
    expect(session.final).toMatchObject({ type: 'run.failed', error: { code: 'invalid_request' } });
    expect(session.final.type === 'run.failed' && session.final.error.message).toMatch(/session/);
  });
});
