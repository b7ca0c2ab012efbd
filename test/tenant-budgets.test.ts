/**
 * Tenants' submit rate and daily budgets on a fleet of two planners on a real nats-server: the counters live in one
 * KV bucket every planner changes by compare-and-set, so the limits hold across the fleet.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { RunEvent, RunEventOf, RunRequestInput, TenantsConfig } from '@agentmesh/protocol';
import { submitRun, tenantUsageReport } from '@agentmesh/planner';
import { startOpenAiServer } from './fixtures/llm/openai-server.js';
import type { FakeLlmServer } from './fixtures/llm/common.js';
import { cleanEnv, runAgentmesh } from './helpers/cli.js';
import { startNatsFleet, type NatsFleet } from './helpers/fleet.js';
import { waitForRunEnd } from './helpers/wait.js';
import { followRun } from '@agentmesh/planner';

const natsUrl = inject('natsUrl');
const TENANTS: TenantsConfig = {
  burst: { runs_per_minute: 5 },
  lean: { daily_cost_usd: 0.1 },
  mid: { daily_tokens: 250 },
  family: { daily_tokens: 1_000_000 },
};
let fleet: NatsFleet;
let server: FakeLlmServer;

beforeAll(async () => {
  server = await startOpenAiServer((_body, i) => ({
    text: `answer ${i}`,
    usage: { input_tokens: 1_000_000, output_tokens: 0 },
  }));
  fleet = await startNatsFleet(natsUrl, { prefixTag: 'tbud' });
  const options = {
    tenants: TENANTS,
    providers: { baseUrl: server.url, maxRetries: 0, env: {} },
    // $0.15 per million input tokens: each answer of the fake server costs $0.15
    prices: { 'tbud-model': { input_per_mtok: 0.15, output_per_mtok: 0.6 } },
  };
  await fleet.planner('tbud-a', options);
  await fleet.planner('tbud-b', options);
}, 60_000);
afterAll(async () => {
  await fleet?.stop();
  await server?.close();
});

async function runToEnd(request: RunRequestInput): Promise<{ final: RunEvent; events: RunEvent[] }> {
  const { client, prefix } = fleet;
  await submitRun(client, request, { prefix });
  const events: RunEvent[] = [];
  const final = await followRun(client, request.id!, { prefix, onEvent: (e) => events.push(e) });
  return { final, events };
}

const turns = (events: RunEvent[]) => events.filter((e) => e.type === 'llm.request').length;
const calc = (id: string) => ({ id, name: 'math__calc', arguments: { lhs: 1, rhs: 2, op: 'add' } });

describe('tenant quotas and budgets across two planners', () => {
  it('accepts exactly runs_per_minute submissions of a tenant in a minute; the rest fail rate_limited', async () => {
    // the twelve submissions must fall in one minute window: start early in a minute
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 40_000) await new Promise((r) => setTimeout(r, 60_000 - intoMinute + 50));
    const { client, prefix } = fleet;
    const ids = Array.from({ length: 12 }, (_, i) => `tbud-rate-${i}`);
    await Promise.all(
      ids.map((id) =>
        submitRun(
          client,
          { id, task: 'hi', identity: { tenant: 'burst' }, script: [{ text: 'hi' }] },
          { prefix },
        ),
      ),
    );
    const ends = await Promise.all(ids.map((id) => waitForRunEnd(client, id, { prefix, timeoutMs: 60_000 })));
    const done = ends.filter((e) => e.type === 'run.completed');
    const refused = ends.filter((e): e is RunEventOf<'run.failed'> => e.type === 'run.failed');
    expect(done).toHaveLength(5);
    expect(refused).toHaveLength(7);
    for (const e of refused) {
      expect(e.error).toMatchObject({
        code: 'rate_limited',
        details: { tenant: 'burst', runs_per_minute: 5 },
      });
      const after = e.error.details!['retry_after_ms'] as number;
      expect(after).toBeGreaterThan(0);
      expect(after).toBeLessThanOrEqual(60_000);
    }
    // another tenant is not limited by burst's window
    const other = await runToEnd({
      id: 'tbud-rate-other',
      task: 'hi',
      identity: { tenant: 'calm' },
      script: [{ text: 'hi' }],
    });
    expect(other.final).toMatchObject({ type: 'run.completed', status: 'done' });
  }, 120_000);

  it('fails a run whose tenant spent its daily_cost_usd before any model request', async () => {
    const request = (id: string): RunRequestInput => ({
      id,
      task: 'spend',
      identity: { tenant: 'lean' },
      provider: 'openai-compatible',
      model: 'tbud-model',
    });
    const before = server.requests.length;
    const first = await runToEnd(request('tbud-lean-1'));
    expect(first.final).toMatchObject({ type: 'run.completed', status: 'done', cost_usd: 0.15 });
    const second = await runToEnd(request('tbud-lean-2'));
    expect(second.final).toMatchObject({
      type: 'run.failed',
      error: { code: 'budget_exhausted', details: { tenant: 'lean', daily_cost_usd: 0.1, cost_usd: 0.15 } },
    });
    expect(server.requests.length - before).toBe(1);
  }, 60_000);

  it('ends a run that crosses daily_tokens mid-run after the current turn, with status budget_exhausted', async () => {
    const usage = { input_tokens: 60, output_tokens: 40 };
    const { final, events } = await runToEnd({
      id: 'tbud-mid',
      task: 'work',
      identity: { tenant: 'mid' },
      tools: ['math.calc'],
      script: [
        { tool_calls: [calc('c1')], usage },
        { tool_calls: [calc('c2')], usage },
        { tool_calls: [calc('c3')], usage },
        { text: 'done', usage },
      ],
    });
    expect(final).toMatchObject({ type: 'run.completed', status: 'budget_exhausted' });
    expect((final as RunEventOf<'run.completed'>).reason).toMatch(/daily_tokens \(250\)/);
    // the third turn crossed 250 tokens: its tool call ran, no fourth turn was asked for
    expect(turns(events)).toBe(3);
    expect(events.filter((e) => e.type === 'tool.completed')).toHaveLength(3);
  }, 60_000);

  it("counts a child run's usage toward its parent's tenant, and tenants usage shows it", async () => {
    const { final } = await runToEnd({
      id: 'tbud-parent',
      task: 'delegate',
      identity: { tenant: 'family' },
      tools: ['agent'],
      script: [
        {
          tool_calls: [
            {
              id: 'a1',
              name: 'agent__run',
              arguments: {
                task: 'help',
                script: [{ text: 'child answer', usage: { input_tokens: 500, output_tokens: 500 } }],
              },
            },
          ],
          usage: { input_tokens: 10, output_tokens: 10 },
        },
        { text: 'ok', usage: { input_tokens: 10, output_tokens: 10 } },
      ],
    });
    expect(final).toMatchObject({ type: 'run.completed', status: 'done' });
    const [family] = await tenantUsageReport(fleet.client, {
      prefix: fleet.prefix,
      tenants: TENANTS,
      only: 'family',
    });
    expect(family).toMatchObject({ tenant: 'family', tokens: 1_040, turns: 3 });

    const dir = mkdtempSync(join(tmpdir(), 'tbud-'));
    const config = join(dir, 'agentmesh.yaml');
    writeFileSync(
      config,
      `tenants:\n${Object.entries(TENANTS)
        .map(([name, limits]) => `  ${name}: ${JSON.stringify(limits)}`)
        .join('\n')}\n`,
    );
    const env = cleanEnv({ NATS_URL: natsUrl, AGENTMESH_PREFIX: fleet.prefix, AGENTMESH_CONFIG: config });
    const json = await runAgentmesh(['tenants', 'usage', '--json'], { env });
    expect(json.code, json.stderr).toBe(0);
    const rows = JSON.parse(json.stdout) as { tenant: string; tokens: number; limits: object }[];
    expect(rows.find((r) => r.tenant === 'family')).toMatchObject({
      tokens: 1_040,
      limits: { daily_tokens: 1_000_000 },
    });
    expect(rows.find((r) => r.tenant === 'mid')).toMatchObject({
      tokens: 300,
      limits: { daily_tokens: 250 },
    });
    const table = await runAgentmesh(['tenants', 'usage', 'lean'], { env });
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).toMatch(/lean\s+1000000 \(no limit\)\s+\$0\.1500 \/ \$0\.1/);
  }, 90_000);
});
