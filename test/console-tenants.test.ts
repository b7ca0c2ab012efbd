/**
 * The console's runs page filters by tenant (a select of the tenants seen, kept in the URL as `?tenant=`) and shows
 * each run's tenant, in headless Chromium against an embedded console.
 */
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanEnv, startActor, type ActorProcess } from './helpers/cli.js';

const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
let consoleProcess: ActorProcess;
let origin: string;
let token: string;

beforeAll(async () => {
  consoleProcess = await startActor(
    ['console', '--port', '0', '--script', 'examples/add.json'],
    cleanEnv(),
    /agentmesh console at http:\/\/\S+/,
  );
  const link = new URL(/agentmesh console at (http:\/\/\S+)/.exec(consoleProcess.logs())![1]!);
  origin = link.origin;
  token = link.searchParams.get('token')!;
  for (const [id, tenant] of [
    ['run-ct-acme', 'acme'],
    ['run-ct-globex', 'globex'],
  ] as const) {
    const res = await fetch(`${origin}/api/runs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ id, task: 'add 2 and 3', identity: { tenant } }),
    });
    expect(res.status).toBe(202);
  }
}, 60_000);

afterAll(async () => {
  await consoleProcess?.stop();
});

describe('console runs page, by tenant', () => {
  it('in Chromium: ?tenant= filters the runs, the select lists the tenants seen and keeps the choice in the URL', async () => {
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    try {
      const page = await browser.newPage();
      await page.goto(`${origin}/?token=${token}#/runs?tenant=acme`);
      const acme = page.locator('tr[data-run-id="run-ct-acme"]');
      await acme.waitFor({ timeout: 20_000 });
      expect(await acme.locator('td.tenant').textContent()).toBe('acme');
      const select = page.locator('select[name="tenant"]');
      await select.locator('option').nth(2).waitFor({ state: 'attached', timeout: 20_000 });
      expect(await select.locator('option').allTextContents()).toEqual(['any tenant', 'acme', 'globex']);
      expect(await select.inputValue()).toBe('acme');
      expect(await page.locator('tr[data-run-id="run-ct-globex"]').count()).toBe(0);

      await select.selectOption('globex');
      await page.locator('tr[data-run-id="run-ct-globex"]').waitFor({ timeout: 10_000 });
      expect(await page.locator('tr[data-run-id="run-ct-globex"] td.tenant').textContent()).toBe('globex');
      expect(await acme.count()).toBe(0);
      expect(new URL(page.url()).hash).toBe('#/runs?tenant=globex');
      expect(await page.locator('nav [data-nav="runs"].active, [data-nav="runs"].active').count()).toBe(1);

      await select.selectOption('');
      await acme.waitFor({ timeout: 10_000 });
      expect(await page.locator('tr[data-run-id]').count()).toBe(2);
      expect(new URL(page.url()).hash).toBe('#/runs');
    } finally {
      await browser.close();
    }
  }, 60_000);
});
