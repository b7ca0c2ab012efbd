/**
 * Issue 38, the console's "fork from here": in headless Chromium, a finished run's page forks it before its second
 * model turn with another model (a stand-in OpenAI server, which gets exactly one request carrying the original's
 * first turn and its tool result). The fork API is guarded like the rest: no token, another origin, no JSON.
 */
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOpenAiServer } from './fixtures/llm/openai-server.js';
import type { FakeLlmServer } from './fixtures/llm/common.js';
import { cleanEnv, startActor, type ActorProcess } from './helpers/cli.js';

const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';

let consoleProcess: ActorProcess;
let server: FakeLlmServer;
let origin: string;
let token: string;

beforeAll(async () => {
  server = await startOpenAiServer(() => ({ text: 'the other model says 5' }));
  consoleProcess = await startActor(
    ['console', '--port', '0', '--script', 'examples/add.json'],
    cleanEnv({ OPENAI_API_KEY: 'sk-test', OPENAI_BASE_URL: server.url }),
    /agentmesh console at http:\/\/\S+/,
  );
  const link = new URL(/agentmesh console at (http:\/\/\S+)/.exec(consoleProcess.logs())![1]!);
  origin = link.origin;
  token = link.searchParams.get('token')!;
}, 60_000);

afterAll(async () => {
  await consoleProcess?.stop();
  await server?.close();
});

const auth = { authorization: '', 'content-type': 'application/json' };
const api = (path: string, init: RequestInit = {}) =>
  fetch(`${origin}${path}`, {
    ...init,
    headers: { ...auth, authorization: `Bearer ${token}`, ...init.headers },
  });

interface Shown {
  summary: { status: string };
  events: { type: string; seq: number; iteration?: number; forked_from?: unknown }[];
}

async function finishedRun(runId: string): Promise<Shown> {
  for (let i = 0; i < 400; i++) {
    const res = await api(`/api/runs/${runId}`);
    if (res.ok) {
      const run = (await res.json()) as Shown;
      if (run.events.some((e) => e.type === 'run.completed' || e.type === 'run.failed')) return run;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`run ${runId} did not finish`);
}

describe('the console forks a run from a model turn', () => {
  let runId: string;

  beforeAll(async () => {
    const submitted = await api('/api/runs', {
      method: 'POST',
      body: JSON.stringify({ task: 'add 2 and 3' }),
    });
    expect(submitted.status).toBe(202);
    runId = ((await submitted.json()) as { run_id: string }).run_id;
    await finishedRun(runId);
  }, 60_000);

  it('guards the fork API like the rest: no token, another origin and a body that is not JSON are refused', async () => {
    const body = JSON.stringify({ seq: 2, id: 'fork-forged' });
    const noToken = await fetch(`${origin}/api/runs/${runId}/fork`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    expect(noToken.status).toBe(401);
    const forged = await api(`/api/runs/${runId}/fork`, {
      method: 'POST',
      headers: { origin: 'http://evil.example' },
      body,
    });
    expect(forged.status).toBe(403);
    const text = await api(`/api/runs/${runId}/fork`, {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body,
    });
    expect(text.status).toBe(415);
    expect((await api('/api/runs/fork-forged')).status).toBe(404);
    const bad = await api(`/api/runs/${runId}/fork`, { method: 'POST', body: JSON.stringify({ seq: 0 }) });
    expect(bad.status).toBe(400);
    const missing = await api('/api/runs/no-such-run/fork', {
      method: 'POST',
      body: JSON.stringify({ seq: 2 }),
    });
    expect(missing.status).toBe(404);
  });

  it('in Chromium: "fork from here" on turn 2 starts a fork with another model, which answers turn 2 only', async () => {
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    try {
      const page = await browser.newPage();
      await page.goto(`${origin}/?token=${token}#/runs/${encodeURIComponent(runId)}`);
      await page.locator('h1 [data-status="done"]').waitFor({ timeout: 20_000 });
      await page.locator('.turn[data-iteration="2"] button.fork').click();
      await page.fill('.fork-form input[name="provider"]', 'openai');
      await page.fill('.fork-form input[name="model"]', 'gpt-4o');
      await page.click('.fork-form button[type="submit"]');
      await page.waitForURL(/#\/runs\/fork-/);
      await page.locator('h1 [data-status="done"]').waitFor({ timeout: 20_000 });
      expect(await page.locator('#forked-from').textContent()).toContain(runId);
      const forkId = decodeURIComponent(page.url().split('#/runs/')[1]!);
      const original = await finishedRun(runId);
      const fork = await finishedRun(forkId);
      const before = original.events.find((e) => e.type === 'llm.request' && e.iteration === 2)!.seq - 1;
      expect(fork.events[0]).toMatchObject({
        type: 'run.accepted',
        forked_from: { run_id: runId, seq: before },
      });
      expect(fork.events.filter((e) => e.type === 'llm.request')).toHaveLength(1);
      expect(fork.events.some((e) => e.type === 'tool.started')).toBe(false);
      expect(server.requests).toHaveLength(1);
      const roles = (server.requests[0]!['messages'] as { role: string }[]).map((m) => m.role);
      expect(roles).toEqual(['system', 'user', 'assistant', 'tool']);
      expect(JSON.stringify(server.requests[0]!['messages'])).toContain('I will add the two numbers');
    } finally {
      await browser.close();
    }
  }, 60_000);
});
