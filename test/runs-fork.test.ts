/**
 * Issue 38, `agentmesh runs fork` on a real nats-server: a finished 3-turn scripted run forked at the end of turn 1,
 * once with another script (through the CLI) and once with another model (a stand-in OpenAI server). Each fork
 * starts from the original's conversation with its tool results: nothing before the fork point is asked of a model
 * or executed by a tool again. The original is unchanged, `runs show` lists the forks, and another tenant's fork is
 * refused as not_found.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { NatsBus, RunEvent } from '@agentmesh/protocol';
import {
  forkRequest,
  readRunEvents,
  readRunRecord,
  readTranscript,
  submitRun,
  type RunDetails,
} from '@agentmesh/planner';
import { startOpenAiServer } from './fixtures/llm/openai-server.js';
import type { FakeLlmServer } from './fixtures/llm/common.js';
import { cleanEnv, runAgentmesh } from './helpers/cli.js';
import { startNatsFleet, type NatsFleet } from './helpers/fleet.js';
import { until, waitForRunEnd } from './helpers/wait.js';

const natsUrl = inject('natsUrl');
let fleet: NatsFleet;
let prefix: string;
let client: NatsBus;
let server: FakeLlmServer;

const calc = (lhs: number, rhs: number) => ({ name: 'math.calc', arguments: { lhs, rhs, op: 'add' } });
const modelTurns = (events: RunEvent[]) => events.filter((e) => e.type === 'llm.request').length;

/** Runs a request to its end, once its record says finished (its transcript is stored by then). */
async function finished(runId: string): Promise<RunEvent[]> {
  await waitForRunEnd(client, runId, { prefix, timeoutMs: 60_000 });
  await until(
    `the record of ${runId}`,
    async () => (await readRunRecord(client, runId, { prefix }))?.state === 'finished',
    60_000,
  );
  return readRunEvents(client, runId, { prefix });
}

const cli = (args: string[]) =>
  runAgentmesh([...args, '--nats', natsUrl, '--prefix', prefix], { env: cleanEnv(), timeoutMs: 90_000 });

let original: RunEvent[];
let seq: number;

beforeAll(async () => {
  fleet = await startNatsFleet(natsUrl, { prefixTag: 'rf' });
  ({ prefix, client } = fleet);
  server = await startOpenAiServer(() => ({ text: 'the other model answers: 33' }));
  fleet.onStop(() => server.close());
  await fleet.planner('rf-a', {
    providers: { openaiApiKey: 'sk', openaiBaseUrl: server.url, maxRetries: 0, env: {} },
  });
  await submitRun(
    client,
    {
      id: 'rf-orig',
      task: 'add 1 and 2, then 3 and 3',
      identity: { tenant: 'acme', user: 'ann' },
      script: [{ tool_calls: [calc(1, 2)] }, { tool_calls: [calc(3, 3)] }, { text: 'six' }],
    },
    { prefix },
  );
  original = await finished('rf-orig');
  seq = original.find((e) => e.type === 'llm.request' && e.iteration === 2)!.seq - 1;
}, 120_000);

afterAll(() => fleet.stop());

describe('agentmesh runs fork over NATS', () => {
  it('forks at the end of turn 1 with another script: the prefix is reused, turn 1 is not asked or run again', async () => {
    expect(original.at(-1)).toMatchObject({ type: 'run.completed', status: 'done', text: 'six' });
    expect(fleet.mesh.invocations).toHaveLength(2);
    const before = await readTranscript(client, 'rf-orig', { prefix });
    const dir = mkdtempSync(join(tmpdir(), 'agentmesh-fork-'));
    const script = join(dir, 'fork.json');
    writeFileSync(script, JSON.stringify([{ tool_calls: [calc(10, 20)] }, { text: 'thirty' }]));
    const forked = await cli([
      'runs',
      'fork',
      'rf-orig',
      '--at',
      String(seq),
      '--script',
      script,
      '--id',
      'rf-f1',
      '--json',
    ]);
    expect(forked.stderr).toBe('');
    expect(forked.code).toBe(0);
    const events = forked.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as RunEvent);
    expect(events[0]).toMatchObject({
      type: 'run.accepted',
      run_id: 'rf-f1',
      forked_from: { run_id: 'rf-orig', seq },
      identity: { tenant: 'acme' },
    });
    expect(events.at(-1)).toMatchObject({ type: 'run.completed', status: 'done', text: 'thirty' });
    expect(modelTurns(events)).toBe(2);
    expect(fleet.mesh.invocations.map((i) => i.arguments)).toEqual([
      { lhs: 1, rhs: 2, op: 'add' },
      { lhs: 3, rhs: 3, op: 'add' },
      { lhs: 10, rhs: 20, op: 'add' },
    ]);
    await until(
      'the record of rf-f1',
      async () => (await readRunRecord(client, 'rf-f1', { prefix }))?.state === 'finished',
    );
    const transcript = (await readTranscript(client, 'rf-f1', { prefix }))!;
    expect(transcript.messages.slice(0, 3)).toEqual(before!.messages.slice(0, 3));
    expect(transcript.messages[2]).toMatchObject({ role: 'tool', content: '3' });
    expect(await readTranscript(client, 'rf-orig', { prefix })).toEqual(before);
    expect(await readRunEvents(client, 'rf-orig', { prefix })).toEqual(original);
  }, 120_000);

  it('forks with another model: one model request, carrying the original turn 1 and its tool result', async () => {
    const request = await forkRequest(
      client,
      { runId: 'rf-orig', seq, id: 'rf-f2', provider: 'openai', model: 'gpt-4o' },
      { prefix },
    );
    expect(request).not.toHaveProperty('script');
    await submitRun(client, request, { prefix });
    const events = await finished('rf-f2');
    expect(events.at(-1)).toMatchObject({
      type: 'run.completed',
      status: 'done',
      text: 'the other model answers: 33',
    });
    expect(events[0]).toMatchObject({
      provider: 'openai',
      model: 'gpt-4o',
      forked_from: { run_id: 'rf-orig', seq },
    });
    expect(server.requests).toHaveLength(1);
    const sent = server.requests[0]!['messages'] as {
      role: string;
      content?: unknown;
      tool_calls?: unknown[];
    }[];
    expect(sent.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool']);
    expect(JSON.stringify(sent[2]!.tool_calls)).toContain('"lhs\\":1');
    expect(sent[3]!.content).toContain('3');
    expect(fleet.mesh.invocations).toHaveLength(3);
  }, 120_000);

  it('runs show lists the forks of a run, and a fork names its origin', async () => {
    const shown = await cli(['runs', 'show', 'rf-orig', '--json']);
    expect(shown.code).toBe(0);
    const details = JSON.parse(shown.stdout) as RunDetails;
    expect(details.forks.map((f) => [f.run_id, f.seq, f.status])).toEqual([
      ['rf-f1', seq, 'done'],
      ['rf-f2', seq, 'done'],
    ]);
    const human = await cli(['runs', 'show', 'rf-orig']);
    expect(human.stdout).toMatch(new RegExp(`forks:\\n  rf-f1  after seq ${seq}  done`));
    expect(human.stdout).toContain(
      `fork points (agentmesh runs fork rf-orig --at SEQ): 2 (start), ${seq} (after turn 1)`,
    );
    const fork = await cli(['runs', 'show', 'rf-f1']);
    expect(fork.stdout).toContain(`forked from rf-orig after seq ${seq}`);
  }, 120_000);

  it("refuses another tenant's run and a seq inside a turn, with named errors", async () => {
    await submitRun(
      client,
      {
        id: 'rf-evil',
        task: 'x',
        identity: { tenant: 'evil' },
        script: [{ text: 'x' }],
        fork: { run_id: 'rf-orig', seq },
      },
      { prefix },
    );
    expect((await finished('rf-evil')).at(-1)).toMatchObject({
      type: 'run.failed',
      error: { code: 'not_found' },
    });
    const inside = await cli(['runs', 'fork', 'rf-orig', '--at', String(seq + 2), '--id', 'rf-inside']);
    expect(inside.code).toBe(1);
    expect(inside.stdout).toMatch(/invalid_request|tool calls had not all finished/);
    const beyond = await cli(['runs', 'fork', 'rf-orig', '--at', '999', '--id', 'rf-beyond', '--json']);
    expect(beyond.code).toBe(1);
    expect(JSON.parse(beyond.stdout.trim().split('\n').at(-1)!)).toMatchObject({
      type: 'run.failed',
      error: {
        code: 'invalid_request',
        message: expect.stringContaining('beyond the events of run rf-orig'),
      },
    });
    expect(fleet.mesh.invocations).toHaveLength(3);
  }, 120_000);
});
