import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { MemoryBus, silentLogger, type RunEvent, type RunRequestInput } from '@agentmesh/protocol';
import { Catalog } from '@agentmesh/catalog';
import { ToolWorker, defineTool } from '@agentmesh/tool-worker';
import { Planner, type PlannerOptions } from '../planner.js';
import type { RunSnapshot } from '../model/snapshot.js';
import { SUMMARY_PREFIX } from '../compaction.js';
import { readTranscript } from '../infra/transcripts.js';

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
});

async function mesh(options: Partial<PlannerOptions> = {}) {
  const bus = new MemoryBus();
  const catalog = new Catalog({ bus, logger: silentLogger() });
  await catalog.start();
  const worker = new ToolWorker({ bus, tools: [add], logger: silentLogger(), threads: 1 });
  await worker.start();
  const snapshots = new Map<string, RunSnapshot>();
  const planner = new Planner({
    bus,
    logger: silentLogger(),
    checkpoint: (s) => void snapshots.set(s.run_id, structuredClone(s)),
    ...options,
  });
  await planner.start();
  stop = async () => {
    await planner.drain();
    await worker.drain();
    await catalog.stop();
    await bus.close();
  };
  const run = async (request: RunRequestInput) => {
    const events: RunEvent[] = [];
    const final = await planner.execute(request, { onEvent: (e) => events.push(e) });
    const transcript = await readTranscript(bus, request.id!);
    return { final, events, messages: transcript?.messages ?? snapshots.get(request.id!)?.messages ?? [] };
  };
  return { planner, run };
}

const addTurn = (a: number, b: number) => ({ tool_calls: [{ name: 'math__add', arguments: { a, b } }] });

describe('sessions (planner, in-process bus)', () => {
  it("a second run of a session sees the first run's turns, tool calls and results; another tenant does not", async () => {
    const { run } = await mesh();
    await run({
      id: 's-1',
      task: 'add 2 and 3',
      session: 'chat-1',
      script: [addTurn(2, 3), { text: 'it is 5' }],
    });
    const second = await run({
      id: 's-2',
      task: 'and double it?',
      identity: { tenant: 'default', session: 'chat-1' },
      script: [{ text: '10' }],
    });
    expect(second.final, JSON.stringify(second.final)).toMatchObject({ status: 'done' });
    const contents = second.messages.map((m) => `${m.role}:${m.content}`);
    expect(contents[0]).toBe('user:add 2 and 3');
    expect(second.messages.some((m) => m.role === 'tool' && m.content === '5')).toBe(true);
    expect(contents).toContain('assistant:it is 5');
    expect(contents.at(-2)).toBe('user:and double it?');
    const other = await run({
      id: 's-3',
      task: 'what did I ask?',
      session: 'chat-1',
      identity: { tenant: 'acme' },
      script: [{ text: 'nothing yet' }],
    });
    expect(other.messages.map((m) => m.content)).not.toContain('add 2 and 3');
  });

  it('one run at a time per session: a second run waits until the first has ended', async () => {
    const { run } = await mesh();
    const first = run({
      id: 'w-1',
      task: 'slow',
      session: 'busy',
      script: [{ delay_ms: 400, text: 'first done' }],
    });
    await new Promise((r) => setTimeout(r, 50));
    const second = await run({ id: 'w-2', task: 'next', session: 'busy', script: [{ text: 'second' }] });
    const firstResult = await first;
    const firstEnd = Date.parse(firstResult.final.ts);
    const secondAsked = second.events.find((e) => e.type === 'llm.request')!;
    expect(Date.parse(secondAsked.ts)).toBeGreaterThanOrEqual(firstEnd);
    expect(second.messages.map((m) => m.content)).toContain('first done');
  });

  it('compaction past sessions.max_tokens: session.compacted, a summary first, no tool result cut from its call', async () => {
    const { run } = await mesh({ defaults: { sessions: { max_tokens: 60 } } });
    for (let i = 1; i <= 3; i++)
      await run({
        id: `c-${i}`,
        task: `round ${i}: add ${i} and ${i} and explain the result at some length please`,
        session: 'long',
        script: [addTurn(i, i), { text: `the sum of ${i} and ${i} is ${2 * i}, as the tool said` }],
      });
    const last = await run({ id: 'c-4', task: 'summary?', session: 'long', script: [{ text: 'ok' }] });
    const compacted = last.events.find((e) => e.type === 'session.compacted');
    expect(compacted).toBeDefined();
    expect(compacted!.type === 'session.compacted' && compacted!.after_tokens).toBeLessThan(
      compacted!.type === 'session.compacted' ? compacted!.before_tokens : 0,
    );
    expect(last.messages[0]?.content.startsWith(SUMMARY_PREFIX)).toBe(true);
    expect(last.messages[0]?.content).toMatch(/round \d: add/);
    const ids = new Set<string>();
    for (const m of last.messages) {
      if (m.role === 'assistant') for (const c of m.tool_calls ?? []) ids.add(c.id);
      if (m.role === 'tool') expect(ids.has(m.call_id)).toBe(true);
    }
  });

  it('a bad session id is refused with a named error', async () => {
    const { run } = await mesh();
    const bad = await run({
      id: 'bad-1',
      task: 't',
      identity: { tenant: 'default', session: 'a/b' },
      script: [{ text: 'x' }],
    });
    expect(bad.final).toMatchObject({ status: 'failed' });
    expect(bad.final.type === 'run.completed' && bad.final.reason).toMatch(/invalid session: may hold only/);
  });
});
