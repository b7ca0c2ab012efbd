/**
 * Issue 34: examples/chat, a static page on the gateway, in Chromium. The gateway runs as the real `agentmesh
 * gateway` process (keys from a file, CORS from the config); the page streams a run that waits for an approval,
 * is reloaded mid-run, shows what it had shown and resumes with Last-Event-ID, and after Approve ends with every
 * event shown once.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { REPO_ROOT, cleanEnv, startActor, type ActorProcess } from './helpers/cli.js';

const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const KEY = 'chat-example-key-0123456789abcdef0123';
const READY = /agentmesh gateway at (http:\/\/\S+)/;
const dir = mkdtempSync(join(tmpdir(), 'gateway-chat-'));

let pages: Server;
let pageOrigin: string;
let gateway: ActorProcess;
let gatewayUrl: string;

beforeAll(async () => {
  pages = createServer((req, res) => {
    const name = new URL(req.url ?? '/', 'http://x').pathname === '/chat.js' ? 'chat.js' : 'index.html';
    res.writeHead(200, { 'content-type': name.endsWith('.js') ? 'text/javascript' : 'text/html' });
    res.end(readFileSync(join(REPO_ROOT, 'examples', 'chat', name)));
  });
  await new Promise<void>((resolve) => pages.listen(0, '127.0.0.1', resolve));
  pageOrigin = `http://127.0.0.1:${(pages.address() as AddressInfo).port}`;
  const keysFile = join(dir, 'keys.yaml');
  writeFileSync(keysFile, stringify({ [KEY]: 'acme' }));
  const configFile = join(dir, 'agentmesh.yaml');
  writeFileSync(
    configFile,
    stringify({
      approvals: { require: ['math.calc'], timeout_ms: 60_000 },
      gateway: { api_keys_file: keysFile, cors_origins: [pageOrigin] },
    }),
  );
  gateway = await startActor(
    ['gateway', '--port', '0', '--script', 'examples/add.json', '--config', configFile],
    cleanEnv(),
    /API key\(s\), \d+ tenant\(s\)/,
  );
  gatewayUrl = READY.exec(gateway.logs())![1]!;
}, 60_000);

afterAll(async () => {
  await gateway?.stop();
  await new Promise((resolve) => pages?.close(resolve));
});

describe('agentmesh gateway with examples/chat', () => {
  it('says how many keys it has, and refuses a request without one', async () => {
    expect(gateway.logs()).toContain('1 API key(s), 1 tenant(s)');
    expect((await fetch(`${gatewayUrl}/v1/runs`)).status).toBe(401);
  });

  it('says at start when access is open (no keys)', async () => {
    const open = await startActor(['gateway', '--port', '0'], cleanEnv(), /open access/);
    try {
      expect(open.logs()).toMatch(
        /no API keys configured: open access, every request acts as tenant "default"/,
      );
    } finally {
      await open.stop();
    }
  });

  it('in Chromium: a reload mid-run resumes the stream from the last event, each event shown once', async () => {
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    try {
      const page = await browser.newPage();
      const resumedFrom: string[] = [];
      page.on('request', (request) => {
        if (request.url().includes('/events')) resumedFrom.push(request.headers()['last-event-id'] ?? '');
      });
      await page.goto(`${pageOrigin}/?gateway=${encodeURIComponent(gatewayUrl)}&key=${KEY}`);
      await page.fill('input[name="task"]', 'add 2 and 3');
      await page.click('button[type="submit"]');
      const approval = page.locator('#log li[data-kind="approval"]');
      await approval.waitFor({ timeout: 20_000 });
      const before = await page.locator('#log li').allTextContents();
      await page.reload();
      await approval.waitFor({ timeout: 20_000 });
      expect(await page.locator('#log li').allTextContents()).toEqual(before);
      await expect.poll(() => resumedFrom.length).toBe(2);
      expect(resumedFrom[0]).toBe('0');
      expect(Number(resumedFrom[1])).toBeGreaterThan(0);
      await approval.locator('button', { hasText: 'Approve' }).click();
      await page.locator('#status', { hasText: 'finished: done' }).waitFor({ timeout: 20_000 });
      const kinds = await page
        .locator('#log li')
        .evaluateAll((lis) => lis.map((li) => li.getAttribute('data-kind')));
      expect(kinds).toEqual(['user', 'assistant', 'tool', 'approval', 'decision', 'result', 'assistant']);
      expect(await page.locator('#log li[data-kind="assistant"]').allTextContents()).toEqual([
        'I will add the two numbers with the calculator.',
        '2 + 3 = 5',
      ]);
      expect(await page.locator('#log li[data-kind="result"]').textContent()).toContain('5');
    } finally {
      await browser.close();
    }
  }, 60_000);
});
