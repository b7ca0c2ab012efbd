/**
 * Issue 15, sessions on a real nats-server with the stand-in OpenAI and Anthropic servers: a session continued by a
 * second run on another planner (its model request carries the first run's turns), compaction written by the model
 * and keeping tool pairs whole on both providers, tenant isolation, and `agentmesh sessions`.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { NatsBus, RunEvent } from '@agentmesh/protocol';
import {
  SessionStore,
  openSessionStores,
  readRunEvents,
  submitRun,
  type PlannerOptions,
} from '@agentmesh/planner';
import { startAnthropicServer } from './fixtures/llm/anthropic-server.js';
import type { FakeLlmServer, FakeReply } from './fixtures/llm/common.js';
import { startOpenAiServer } from './fixtures/llm/openai-server.js';
import { cleanEnv, runAgentmesh } from './helpers/cli.js';
import { startNatsFleet, type NatsFleet } from './helpers/fleet.js';
import { waitForRunEnd } from './helpers/wait.js';

const natsUrl = inject('natsUrl');
let fleet: NatsFleet;
let prefix: string;
let client: NatsBus;
const servers: FakeLlmServer[] = [];

const isSummaryRequest = (body: Record<string, unknown>) =>
  JSON.stringify(body).includes('You compact a conversation');

/** A tool call to math.calc on a fresh question, a short answer after a tool result, a summary when asked for one. */
function reply(body: Record<string, any>): FakeReply {
  if (isSummaryRequest(body)) return { text: 'MODEL SUMMARY: the user added numbers with math.calc' };
  const last = JSON.stringify((body['messages'] as unknown[]).at(-1));
  if (last.includes('tool_result') || last.includes('"role":"tool"')) return { text: 'the tool answered' };
  return { tool_calls: [{ name: 'math__calc', arguments: { lhs: 20, rhs: 22, op: 'add' } }] };
}

const startPlanner = async (id: string, options: Partial<PlannerOptions>) =>
  (await fleet.planner(id, options)).planner;

async function runToEnd(request: Record<string, unknown>): Promise<RunEvent[]> {
  const runId = String(request['id']);
  await submitRun(client, request as never, { prefix });
  await waitForRunEnd(client, runId, { prefix });
  return readRunEvents(client, runId, { prefix });
}

beforeAll(async () => {
  fleet = await startNatsFleet(natsUrl, { prefixTag: 'ss' });
  ({ prefix, client } = fleet);
  fleet.onStop(async () => {
    for (const s of servers) await s.close().catch(() => undefined);
  });
});

afterAll(() => fleet.stop());

describe('sessions over NATS', () => {
  it("a session continued on another planner: the second model request carries the first run's turns", async () => {
    const server = await startOpenAiServer((body) => reply(body));
    servers.push(server);
    const providers = { openaiApiKey: 'sk', openaiBaseUrl: server.url, maxRetries: 0, env: {} };
    const a = await startPlanner('ss-a', { providers });
    const first = await runToEnd({
      id: 'ss-1',
      task: 'what is 20 + 22?',
      session: 'chat',
      provider: 'openai',
      model: 'gpt-4o',
    });
    expect(first.at(-1)).toMatchObject({ type: 'run.completed', status: 'done' });
    await a.drain();
    await startPlanner('ss-b', { providers });
    const asked = server.requests.length;
    const second = await runToEnd({
      id: 'ss-2',
      task: 'and doubled?',
      session: 'chat',
      provider: 'openai',
      model: 'gpt-4o',
    });
    expect(second.at(-1)).toMatchObject({ type: 'run.completed', status: 'done' });
    expect(second.find((e) => e.type === 'run.started')).toMatchObject({ planner_id: 'ss-b' });
    const messages = JSON.stringify(server.requests[asked]!['messages']);
    expect(messages).toContain('what is 20 + 22?');
    expect(messages).toContain('math__calc');
    expect(messages).toContain('"role":"tool"');
    expect(messages).toContain('the tool answered');
    expect(messages.indexOf('what is 20 + 22?')).toBeLessThan(messages.indexOf('and doubled?'));

    const cli = (args: string[]) =>
      runAgentmesh(['sessions', ...args, '--nats', natsUrl, '--prefix', prefix], { env: cleanEnv() });
    const list = await cli(['list']);
    expect(list.stdout).toMatch(/chat\s+2 run\(s\)/);
    const other = await cli(['show', 'chat', '--tenant', 'acme']);
    expect(other.code).toBe(1);
    expect(other.stderr).toContain('no session "chat" for tenant "acme"');
    expect((await cli(['list', '--tenant', 'acme'])).stdout).toContain('no sessions');
    expect((await cli(['fork', 'chat', 'chat-copy'])).code).toBe(0);
    const shown = await cli(['show', 'chat-copy']);
    expect(shown.stdout).toContain('user: what is 20 + 22?');
    expect((await cli(['delete', 'chat-copy'])).code).toBe(0);
    expect((await cli(['show', 'chat-copy'])).code).toBe(1);
    const bad = await cli(['fork', 'chat', 'no/slashes']);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/invalid new session id/);

    const isolated = await runToEnd({
      id: 'ss-3',
      task: 'fresh start',
      session: 'chat',
      identity: { tenant: 'acme' },
      provider: 'openai',
      model: 'gpt-4o',
    });
    expect(isolated.at(-1)).toMatchObject({ status: 'done' });
    const acmeRequest = JSON.stringify(
      server.requests.find((r) => JSON.stringify(r).includes('fresh start'))!['messages'],
    );
    expect(acmeRequest).not.toContain('what is 20 + 22?');
  });

  it.each([
    ['openai', startOpenAiServer, { provider: 'openai', model: 'gpt-4o' }],
    ['anthropic', startAnthropicServer, { provider: 'anthropic', model: 'claude-sonnet-4-6' }],
  ] as const)(
    '%s: compaction is written by the model and keeps tool calls with their results',
    async (kind, start, choice) => {
      const server = await start((body) => reply(body));
      servers.push(server);
      for (const p of fleet.planners) await p.drain();
      await startPlanner(`ss-compact-${kind}`, {
        providers: {
          ...(kind === 'openai'
            ? { openaiApiKey: 'sk', openaiBaseUrl: server.url }
            : { anthropicApiKey: 'sk', anthropicBaseUrl: server.url }),
          maxRetries: 0,
          env: {},
        },
        defaults: { sessions: { max_tokens: 120 } },
      });
      const session = `compact-${kind}`;
      let compacted: RunEvent | undefined;
      for (let i = 1; i <= 4 && compacted === undefined; i++) {
        const events = await runToEnd({
          id: `${session}-${i}`,
          task: `round ${i}: please add twenty and twenty-two with the calculator and explain it to me in detail`,
          session,
          ...choice,
        });
        expect(events.at(-1)).toMatchObject({ status: 'done' });
        compacted = events.find((e) => e.type === 'session.compacted');
      }
      expect(compacted).toMatchObject({ type: 'session.compacted' });
      const summaryAsked = server.requests.findIndex(isSummaryRequest);
      expect(summaryAsked).toBeGreaterThanOrEqual(0);
      const next = server.requests[summaryAsked + 1]!;
      const messages = next['messages'] as Record<string, any>[];
      expect(JSON.stringify(messages.find((m) => m['role'] !== 'system'))).toContain('MODEL SUMMARY');
      const text = JSON.stringify(messages);
      const callIds = [
        ...text.matchAll(kind === 'openai' ? /"tool_call_id":"([^"]+)"/g : /"tool_use_id":"([^"]+)"/g),
      ].map((m) => m[1]!);
      expect(callIds.length).toBeGreaterThan(0);
      for (const id of callIds) expect(text.split(id).length).toBeGreaterThanOrEqual(3);
    },
  );
});

describe('session locks on NATS KV', () => {
  it('a holder whose lock expired and was taken neither renews nor releases over the new holder', async () => {
    const { blobs, meta } = await openSessionStores(client, prefix);
    const store = new SessionStore(blobs, meta);
    const never = new AbortController().signal;
    const stale = await store.lock('acme', 'locked', { runId: 'r-stale', ttlMs: 100, signal: never });
    // waits for the stale lock to expire, then takes it
    const live = await store.lock('acme', 'locked', { runId: 'r-live', ttlMs: 60_000, signal: never });
    expect(await stale.renew()).toBe(false);
    await stale.release();
    expect(await store.tryLock('acme', 'locked', { runId: 'r-other', ttlMs: 60_000 })).toBeUndefined();
    expect(await live.renew()).toBe(true);
    await live.release();
    expect((await store.tryLock('acme', 'locked', { runId: 'r-other', ttlMs: 60_000 }))?.runId).toBe(
      'r-other',
    );
  });
});
