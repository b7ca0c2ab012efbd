import { mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { headers as natsHeaders } from '@nats-io/transport-node';
import { chromium, type Browser, type Page } from 'playwright-core';
import { NatsBus, encodeJson, subjects } from '@agentmesh/protocol';
import { followRun } from '@agentmesh/planner';
import { REPO_ROOT, cleanEnv, startActor, type ActorProcess } from './helpers/cli.js';
import { freePort } from './helpers/nats-server.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from './helpers/otlp-receiver.js';
import { dropPrefix, uniquePrefix } from './fixtures/llm/nats.js';

const natsUrl = inject('natsUrl');
const prefix = uniquePrefix('obs');
const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const actors: ActorProcess[] = [];
let bus: NatsBus;
let receiver: OtlpReceiver;
let browser: Browser;
let consoleUrl: string;
/** The URL the console printed: it carries the per-launch token the page keeps in a cookie. */
let consoleLink: string;
let consoleToken: string;
const metricsPorts: Record<string, number> = {};
/** Screenshots go to docs/ with AGENTMESH_SCREENSHOTS=1 (to refresh the committed ones), else to a temporary folder. */
const SHOTS =
  process.env['AGENTMESH_SCREENSHOTS'] === '1'
    ? join(REPO_ROOT, 'docs')
    : mkdtempSync(join(tmpdir(), 'console-'));

function fleetEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return cleanEnv({
    NATS_URL: natsUrl,
    AGENTMESH_PREFIX: prefix,
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_BSP_SCHEDULE_DELAY: '100',
    ...extra,
  });
}

async function metricsOf(name: string): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${metricsPorts[name]}/metrics`);
  expect(res.status).toBe(200);
  return res.text();
}

/** Sums the samples of `metric` whose labels include every one of `labels`. */
function sum(text: string, metric: string, labels: Record<string, string> = {}): number {
  let total = 0;
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+)(\{[^}]*\})? (\S+)$/.exec(line);
    if (!m || m[1] !== metric) continue;
    if (Object.entries(labels).every(([k, v]) => (m[2] ?? '').includes(`${k}="${v}"`))) total += Number(m[3]);
  }
  return total;
}

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  bus = await NatsBus.connect(natsUrl);
  for (const name of ['planner', 'worker-a', 'worker-b', 'catalog']) metricsPorts[name] = await freePort();
  actors.push(await startActor(['catalog', '--metrics-port', String(metricsPorts['catalog'])], fleetEnv()));
  actors.push(
    ...(await Promise.all([
      startActor(['planner', '--metrics-port', String(metricsPorts['planner'])], fleetEnv()),
      startActor(['worker', '--metrics-port', String(metricsPorts['worker-a'])], fleetEnv()),
      startActor(['worker'], fleetEnv({ AGENTMESH_METRICS_PORT: String(metricsPorts['worker-b']) })),
    ])),
  );
  const consoleProcess = await startActor(
    ['console', '--port', '0', '--script', 'examples/add.json'],
    fleetEnv({ OTEL_TRACES_EXPORTER: 'none' }),
    /agentmesh console at http:\/\/\S+/,
  );
  actors.push(consoleProcess);
  consoleLink = /agentmesh console at (http:\/\/\S+)/.exec(consoleProcess.logs())![1]!;
  consoleUrl = new URL(consoleLink).origin;
  consoleToken = new URL(consoleLink).searchParams.get('token')!;
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await Promise.all(actors.map((a) => a.stop()));
  if (bus) {
    await dropPrefix(bus, prefix);
    await bus.close();
  }
  await receiver?.close();
}, 60_000);

async function waitForTools(page: Page): Promise<void> {
  await page.goto(`${consoleLink}#/tools`);
  expect(page.url()).toBe(`${consoleUrl}/#/tools`);
  await page.locator('tr[data-tool="math.calc"]').waitFor({ timeout: 20_000 });
}

describe('console in a real Chromium against a NATS fleet', () => {
  it('submits a run, follows it to done live, and shows its tool calls', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
    await waitForTools(page);
    await page.locator('input[name="q"]').fill('sha256 digest');
    await page.locator('tr[data-tool="crypto.sha256"]').waitFor();
    expect(await page.locator('tbody tr').first().getAttribute('data-tool')).toBe('crypto.sha256');

    await page.goto(`${consoleUrl}/#/runs`);
    await page.locator('#live.on').waitFor();
    await page.click('a[data-nav="submit"]');
    await page.fill('textarea[name="task"]', 'add 2 and 3');
    await page.fill('input[name="tenant"]', 'acme');
    await page.click('button[type="submit"]');
    await page.waitForURL(/#\/runs\/run-/);
    const runId = decodeURIComponent(page.url().split('#/runs/')[1]!);
    await page.locator('h1 [data-status="done"]').waitFor({ timeout: 30_000 });
    const call = page.locator('table.calls tbody tr').first();
    expect(await call.locator('td').first().textContent()).toBe('math.calc');
    expect(await call.locator('td').nth(1).textContent()).toContain('"op":"add"');
    expect(await call.locator('td').nth(2).textContent()).not.toBe('');
    expect(await call.locator('td').nth(4).textContent()).toContain('5');
    expect(await page.locator('.turn .text').last().textContent()).toBe('2 + 3 = 5');
    expect(await page.locator('.timeline li[data-type="run.completed"]').count()).toBe(1);
    await page.screenshot({ path: join(SHOTS, 'console-run.png'), fullPage: true });

    await page.goto(`${consoleUrl}/#/runs`);
    const row = page.locator(`tr[data-run-id="${runId}"]`);
    await row.locator('[data-status="done"]').waitFor();
    expect(await row.locator('a').textContent()).toBe(runId);
    await page.selectOption('select[name="status"]', 'failed');
    expect(await row.count()).toBe(0);
    await page.selectOption('select[name="status"]', 'done');
    await page.selectOption('select[name="tenant"]', 'acme');
    await page.fill('input[name="q"]', runId.slice(-8));
    expect(await row.count()).toBe(1);
    await row.locator('a').click();
    await page.locator('table.calls tbody tr').first().waitFor();
    expect(await page.locator('#run-id').textContent()).toBe(runId);

    await page.goto(`${consoleUrl}/#/fleet`);
    await page.locator('tr[data-actor]').nth(3).waitFor();
    const names = await page.locator('tr[data-actor] td:first-child').allTextContents();
    expect(names.sort()).toEqual([
      'agentmesh-catalog',
      'agentmesh-planner',
      'agentmesh-tool-worker',
      'agentmesh-tool-worker',
    ]);
    const loads = await page.locator('tr[data-actor] td:nth-child(4)').allTextContents();
    expect(loads).toContain('0 now · 1 runs');
    expect(loads.filter((l) => l.endsWith('tool calls'))).toHaveLength(2);
    await page.screenshot({ path: join(SHOTS, 'console-fleet.png'), fullPage: true });
    expect(statSync(join(SHOTS, 'console-fleet.png')).size).toBeGreaterThan(10_000);
    await page.close();
  });

  it('resumes a run stream after the last seen seq (Last-Event-ID)', async () => {
    const reply = await fetch(`${consoleUrl}/api/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${consoleToken}` },
      body: JSON.stringify({ task: 'add 2 and 3' }),
    });
    expect(reply.status).toBe(202);
    const { run_id } = (await reply.json()) as { run_id: string };
    await followRun(bus, run_id, { prefix });
    const res = await fetch(`${consoleUrl}/api/runs/${run_id}/events`, {
      headers: { 'last-event-id': '5', authorization: `Bearer ${consoleToken}` },
    });
    const reader = res.body!.getReader();
    let text = '';
    while (!text.includes('"run.completed"')) text += new TextDecoder().decode((await reader.read()).value);
    await reader.cancel();
    const seqs = [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    expect(seqs[0]).toBe(6);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    const bad = await fetch(`${consoleUrl}/api/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${consoleToken}` },
      body: '{"task": ""}',
    });
    expect(bad.status).toBe(400);
    expect(await bad.text()).toContain('task');
  });
});

describe('traces and metrics of a fleet run', () => {
  const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
  const PARENT = '00f067aa0ba902b7';
  let runId: string;

  it('one trace spans the submitter, the planner and both worker processes', async () => {
    runId = `run-trace-${Date.now()}`;
    const calls = Array.from({ length: 16 }, (_, i) => ({
      name: 'math.calc',
      arguments: { lhs: i, rhs: 1, op: 'add' },
    }));
    const h = natsHeaders();
    h.set('traceparent', `00-${TRACE_ID}-${PARENT}-01`);
    await bus.jetstream().publish(
      subjects(prefix).runsSubmit,
      encodeJson({
        id: runId,
        task: 'sixteen sums',
        provider: 'scripted',
        script: [{ text: 'summing', tool_calls: calls }, { text: 'all summed' }],
      }),
      { msgID: runId, headers: h },
    );
    const final = await followRun(bus, runId, { prefix });
    expect(final.type === 'run.completed' && final.status).toBe('done');

    const spans = await receiver.waitFor(
      (all) =>
        all.filter((s) => s.traceId === TRACE_ID && s.name === 'execute_tool math.calc').length >= 32 &&
        all.some((s) => s.traceId === TRACE_ID && s.name === 'run'),
    );
    const mine = spans.filter((s) => s.traceId === TRACE_ID);
    const run = mine.find((s) => s.name === 'run')!;
    expect(run.service).toBe('agentmesh-planner');
    expect(run.parentSpanId).toBe(PARENT);
    expect(run.attributes['agentmesh.run.id']).toBe(runId);
    expect(run.resource['process.pid']).toEqual(expect.any(Number));
    expect(run.resource['host.name']).toEqual(expect.any(String));

    const models = mine.filter((s) => s.attributes['gen_ai.operation.name'] === 'chat');
    expect(models).toHaveLength(2);
    for (const m of models) {
      expect(m.parentSpanId).toBe(run.spanId);
      expect(m.attributes['gen_ai.provider.name']).toBe('scripted');
      expect(m.attributes['gen_ai.request.model']).toEqual(expect.any(String));
      expect(m.attributes['gen_ai.usage.input_tokens']).toEqual(expect.any(Number));
      expect(m.attributes['gen_ai.usage.output_tokens']).toEqual(expect.any(Number));
    }
    expect(models.map((m) => m.attributes['gen_ai.response.finish_reasons'])).toContainEqual(['tool_calls']);

    const clients = mine.filter(
      (s) => s.service === 'agentmesh-planner' && s.name === 'execute_tool math.calc',
    );
    const servers = mine.filter((s) => s.service === 'agentmesh-tool-worker');
    expect(clients).toHaveLength(16);
    expect(servers).toHaveLength(16);
    for (const c of clients) expect(c.parentSpanId).toBe(run.spanId);
    const byId = new Map(clients.map((c) => [c.spanId, c]));
    for (const s of servers) {
      const client = byId.get(s.parentSpanId);
      expect(client, `server span ${s.spanId} has a planner client span as parent`).toBeDefined();
      expect(s.attributes['gen_ai.tool.call.id']).toBe(client!.attributes['gen_ai.tool.call.id']);
      expect(s.attributes['gen_ai.tool.name']).toBe('math.calc');
    }
    const workerPids = new Set(servers.map((s) => s.resource['process.pid']));
    expect(workerPids.size).toBe(2);
    expect(workerPids.has(run.resource['process.pid'])).toBe(false);
  });

  it('each actor serves its metrics after the runs', async () => {
    const planner = await metricsOf('planner');
    expect(sum(planner, 'agentmesh_runs_started_total')).toBeGreaterThanOrEqual(3);
    expect(sum(planner, 'agentmesh_runs_finished_total', { status: 'done' })).toBeGreaterThanOrEqual(3);
    expect(sum(planner, 'agentmesh_run_duration_seconds_count')).toBeGreaterThanOrEqual(3);
    expect(sum(planner, 'agentmesh_model_calls_total', { provider: 'scripted' })).toBeGreaterThanOrEqual(6);
    expect(sum(planner, 'agentmesh_model_tokens_total', { direction: 'input' })).toBeGreaterThan(0);
    expect(
      sum(planner, 'agentmesh_tool_calls_total', { tool: 'math.calc', outcome: 'ok' }),
    ).toBeGreaterThanOrEqual(18);
    expect(sum(planner, 'agentmesh_runs_in_flight')).toBe(0);
    expect(planner).toContain('agentmesh_intake_lag{actor="planner"} 0');

    const workers = [await metricsOf('worker-a'), await metricsOf('worker-b')];
    const served = workers.map((w) =>
      sum(w, 'agentmesh_tool_calls_total', { tool: 'math.calc', outcome: 'ok' }),
    );
    expect(served[0]! + served[1]!).toBeGreaterThanOrEqual(18);
    expect(served.every((n) => n > 0)).toBe(true);
    for (const w of workers) {
      expect(w).toContain('# TYPE agentmesh_tool_call_duration_seconds histogram');
      expect(sum(w, 'agentmesh_tool_calls_in_flight')).toBe(0);
    }

    const catalog = await metricsOf('catalog');
    expect(sum(catalog, 'agentmesh_catalog_tools', { state: 'registered' })).toBeGreaterThanOrEqual(4);
    expect(sum(catalog, 'agentmesh_catalog_tools', { state: 'available' })).toBeGreaterThanOrEqual(4);
  });
});

export type { ReceivedSpan };
