import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { cleanEnv, startActor, type ActorProcess } from './helpers/cli.js';

const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const dir = mkdtempSync(join(tmpdir(), 'console-access-'));
const configFile = join(dir, 'agentmesh.yaml');
writeFileSync(configFile, stringify({ approvals: { require: ['math.calc'], timeout_ms: 60_000 } }));

let consoleProcess: ActorProcess;
let origin: string;
let token: string;

beforeAll(async () => {
  consoleProcess = await startActor(
    ['console', '--port', '0', '--script', 'examples/add.json', '--config', configFile],
    cleanEnv(),
    /agentmesh console at http:\/\/\S+/,
  );
  const link = new URL(/agentmesh console at (http:\/\/\S+)/.exec(consoleProcess.logs())![1]!);
  origin = link.origin;
  token = link.searchParams.get('token')!;
}, 60_000);

afterAll(async () => {
  await consoleProcess?.stop();
});

const auth = () => ({ authorization: `Bearer ${token}`, 'content-type': 'application/json' });

/** Reads a run's event stream until one of `types` arrives; returns the events seen. */
async function readUntil(
  runId: string,
  types: string[],
  after = 0,
): Promise<{ type: string; seq: number }[]> {
  const res = await fetch(`${origin}/api/runs/${runId}/events?after=${after}`, { headers: auth() });
  const reader = res.body!.getReader();
  const events: { type: string; seq: number; [k: string]: unknown }[] = [];
  let buffer = '';
  while (!events.some((e) => types.includes(e.type))) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += new TextDecoder().decode(value);
    const frames = buffer.split('\n\n');
    buffer = frames.pop()!;
    for (const frame of frames) {
      const data = /^data: (.*)$/m.exec(frame)?.[1];
      if (data !== undefined && /^event: run-event$/m.test(frame)) events.push(JSON.parse(data));
    }
  }
  await reader.cancel();
  return events;
}

describe('agentmesh console (embedded) keeps the configured approvals', () => {
  it('prints a link with a per-launch token of at least 128 bits', () => {
    expect(token.length).toBeGreaterThanOrEqual(22);
    expect(consoleProcess.logs()).toContain(`${origin}/?token=${token}`);
  });

  it('pauses a run on approvals.require until the console approves the call', async () => {
    const submitted = await fetch(`${origin}/api/runs`, {
      method: 'POST',
      headers: auth(),
      body: JSON.stringify({ task: 'add 2 and 3' }),
    });
    expect(submitted.status).toBe(202);
    const { run_id: runId } = (await submitted.json()) as { run_id: string };
    const before = await readUntil(runId, ['approval.requested', 'run.completed', 'run.failed']);
    const requested = before.find((e) => e.type === 'approval.requested') as
      { approval_id: string; seq: number } | undefined;
    expect(before.map((e) => e.type)).not.toContain('tool.started');
    expect(requested).toBeDefined();
    const decide = (approvalId: string, body: unknown) =>
      fetch(`${origin}/api/runs/${runId}/approvals/${approvalId}`, {
        method: 'POST',
        headers: auth(),
        body: JSON.stringify(body),
      });
    const unclear = await decide(requested!.approval_id, { decision: 'maybe' });
    expect(unclear.status).toBe(400);
    expect(await unclear.text()).toContain('decision');
    expect((await decide('appr-nobody-asked', { decision: 'approve' })).status).toBe(404);
    const decided = await decide(requested!.approval_id, { decision: 'approve' });
    expect(decided.status).toBe(200);
    const after = await readUntil(runId, ['run.completed', 'run.failed'], requested!.seq);
    expect(after.map((e) => e.type)).toEqual(
      expect.arrayContaining(['approval.decided', 'tool.completed', 'run.completed']),
    );
    expect(after.at(-1)).toMatchObject({ type: 'run.completed', status: 'done', text: '2 + 3 = 5' });
  });

  it('refuses the same submission from another origin in the real process (no run starts)', async () => {
    const forged = await fetch(`${origin}/api/runs`, {
      method: 'POST',
      headers: { origin: 'http://evil.example', 'content-type': 'text/plain' },
      body: JSON.stringify({ id: 'run-forged-process', task: 'add' }),
    });
    expect(forged.status).toBe(403);
    const shown = await fetch(`${origin}/api/runs/run-forged-process`, { headers: auth() });
    expect(shown.status).toBe(404);
  });

  it('in Chromium: the printed link opens the console, and Approve on the run page lets the call run, and the finished run offers no cancel', async () => {
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    try {
      const page = await browser.newPage();
      await page.goto(`${origin}/?token=${token}#/submit`);
      expect(page.url()).toBe(`${origin}/#/submit`);
      await page.fill('textarea[name="task"]', 'add 2 and 3');
      await page.click('button[type="submit"]');
      await page.waitForURL(/#\/runs\/run-/);
      const approval = page.locator('.approval[data-approval-id]');
      await approval.waitFor({ timeout: 20_000 });
      expect(await approval.textContent()).toContain('math.calc');
      const cancel = page.locator('#cancel');
      expect(await cancel.isVisible()).toBe(true);
      expect(await cancel.isEnabled()).toBe(true);
      await approval.locator('button', { hasText: 'Approve' }).click();
      await page.locator('h1 [data-status="done"]').waitFor({ timeout: 20_000 });
      expect(await page.locator('.approval').count()).toBe(0);
      expect(await page.locator('.timeline li[data-type="approval.decided"]').count()).toBe(1);
      // run.completed arrived live: a finished run offers no cancel, and neither does its page opened afresh
      await cancel.waitFor({ state: 'hidden', timeout: 5_000 });
      await page.reload();
      await page.locator('h1 [data-status="done"]').waitFor({ timeout: 20_000 });
      expect(await cancel.isHidden()).toBe(true);
    } finally {
      await browser.close();
    }
  }, 60_000);
});
