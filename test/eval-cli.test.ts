import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAnthropicServer } from './fixtures/llm/anthropic-server.js';
import type { FakeLlmServer } from './fixtures/llm/common.js';
import { startOpenAiServer } from './fixtures/llm/openai-server.js';
import { cleanEnv, runAgentmesh } from './helpers/cli.js';

const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const EXAMPLE = 'examples/evals/cases.jsonl';
const dir = mkdtempSync(join(tmpdir(), 'am-eval-'));
const lines = (text: string) =>
  text
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);

describe('agentmesh eval, embedded', () => {
  it('runs examples/evals with no key: the table, the failing case with its reasons, exit 1 below --min', async () => {
    const r = await runAgentmesh(['eval', EXAMPLE], { timeoutMs: 90_000 });
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/variant\s+passed\s+pass rate\s+p50\s+p95\s+tokens\s+cost/);
    expect(r.stdout).toMatch(/default\s+5\/6\s+83\.3%/);
    expect(r.stdout).toMatch(
      /failing cases:\n {2}wrong-sum \(line 6, run eval-[\w-]+\)\n {4}- contains: the final text lacks "4"; it is "2 \+ 2 = 5"/,
    );
    expect(r.stdout).toContain('5 of 6 passed (83.3%)');
    expect(r.stderr).toContain('eval: 6/6 runs, 1 failed');
  }, 120_000);

  it('runs scripted variants side by side, each case under each', async () => {
    const r = await runAgentmesh(['eval', EXAMPLE, '--variants', 'scripted:a,scripted:b'], {
      timeoutMs: 90_000,
    });
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/scripted:a\s+5\/6\s+83\.3%/);
    expect(r.stdout).toMatch(/scripted:b\s+5\/6\s+83\.3%/);
    expect(r.stdout).toContain('wrong-sum [scripted:b] (line 6, run eval-');
    expect(r.stdout).toContain('10 of 12 passed (83.3%)');
  }, 120_000);

  it('exits 0 when the pass rate reaches --min', async () => {
    const r = await runAgentmesh(['eval', EXAMPLE, '--min', '0.8', '--concurrency', '2'], {
      timeoutMs: 90_000,
    });
    expect(r.code).toBe(0);
  }, 120_000);

  it('--json prints one case line per case and a summary; --out writes report.json and an HTML page', async () => {
    const out = join(dir, 'report');
    const r = await runAgentmesh(['eval', EXAMPLE, '--json', '--out', out], { timeoutMs: 90_000 });
    expect(r.code).toBe(1);
    const printed = lines(r.stdout);
    const cases = printed.filter((l) => l['type'] === 'case');
    expect(cases).toHaveLength(6);
    for (const c of cases)
      expect(Object.keys(c).sort()).toEqual(
        ['type', 'id', 'variant', 'pass', 'reasons', 'run_id', 'duration_ms', 'usage', 'cost_usd'].sort(),
      );
    expect(cases.find((c) => c['id'] === 'wrong-sum')).toMatchObject({
      pass: false,
      variant: 'default',
      reasons: ['contains: the final text lacks "4"; it is "2 + 2 = 5"'],
    });
    expect(cases.find((c) => c['id'] === 'add-with-calculator')).toMatchObject({
      pass: true,
      usage: { input_tokens: 280, output_tokens: 26 },
    });
    expect(printed.at(-1)).toMatchObject({
      type: 'summary',
      total: 6,
      passed: 5,
      failed: 1,
      pass_rate: 0.8333,
      by_variant: { default: { total: 6, passed: 5 } },
    });
    const report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as {
      summary: unknown;
      cases: unknown[];
    };
    expect(report.summary).toEqual(printed.at(-1));
    expect(report.cases).toHaveLength(6);
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    try {
      const page = await browser.newPage();
      const requests: string[] = [];
      page.on('request', (req) => requests.push(req.url()));
      await page.goto(pathToFileURL(join(out, 'report.html')).href);
      const variants = await page.locator('#variants tbody tr').allInnerTexts();
      expect(variants).toHaveLength(1);
      expect(variants[0]).toMatch(/default\s+5\/6\s+83\.3%/);
      expect(await page.locator('#cases tbody tr').count()).toBe(6);
      const failing = page.locator('#cases tr.case-fail');
      expect(await failing.count()).toBe(1);
      expect(await failing.innerText()).toContain('wrong-sum');
      expect(await failing.locator('li.reason').innerText()).toBe(
        'contains: the final text lacks "4"; it is "2 + 2 = 5"',
      );
      expect(requests.filter((u) => !u.startsWith('file:'))).toEqual([]);
    } finally {
      await browser.close();
    }
  }, 180_000);

  it('reports a malformed line with its number and still runs the other cases; hostile text stays text in HTML', async () => {
    const file = join(dir, 'mixed.jsonl');
    const hostile = '<img src=x onerror="document.title=1">';
    writeFileSync(
      file,
      [
        JSON.stringify({ id: 'ok', task: 'hi', script: [{ text: 'hi' }], expect: { equals: 'hi' } }),
        '{"id": "broken", "task": ',
        JSON.stringify({
          id: hostile,
          task: hostile,
          script: [{ text: `</td>${hostile}` }],
          expect: { equals: 'no' },
        }),
      ].join('\n'),
    );
    const out = join(dir, 'mixed');
    const r = await runAgentmesh(['eval', file, '--out', out], { timeoutMs: 90_000 });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${file} line 2: not valid JSON`);
    expect(r.stdout).toContain('1 of 3 passed (33.3%), 1 malformed line');
    expect(r.stdout).toContain(`${hostile} (line 3, run eval-`);
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    try {
      const page = await browser.newPage();
      await page.goto(pathToFileURL(join(out, 'report.html')).href);
      expect(await page.locator('img, script').count()).toBe(0);
      expect(await page.title()).not.toBe('1');
      expect(await page.locator('#cases tr.case-fail td').first().innerText()).toBe(hostile);
      expect(await page.locator('#line-errors tbody tr').innerText()).toMatch(/^2\s+not valid JSON/);
    } finally {
      await browser.close();
    }
  }, 180_000);

  it('exits 2 for usage errors, naming what is wrong', async () => {
    const cases: [string[], RegExp][] = [
      [['eval'], /eval needs exactly one dataset/],
      [['eval', join(dir, 'missing.jsonl')], /cannot read the dataset .*missing\.jsonl/],
      [['eval', EXAMPLE, '--min', '1.5'], /--min must be a pass rate from 0 to 1, got "1\.5"/],
      [['eval', EXAMPLE, '--concurrency', '0'], /--concurrency must be 1 to 256, got 0/],
      [['eval', EXAMPLE, '--variants', 'gpt:4'], /--variants "gpt:4": unknown provider "gpt"/],
      [['eval', EXAMPLE, '--varients', 'x'], /unknown flag --varients \(did you mean --variants\?\)/],
    ];
    const empty = join(dir, 'empty.jsonl');
    writeFileSync(empty, '\n\n');
    cases.push([['eval', empty], /holds no cases/]);
    for (const [args, message] of cases) {
      const r = await runAgentmesh(args, { timeoutMs: 60_000 });
      expect({ args, code: r.code }).toEqual({ args, code: 2 });
      expect(r.stderr).toMatch(message);
    }
  }, 180_000);
});

describe('agentmesh eval --variants', () => {
  let openai: FakeLlmServer;
  let anthropic: FakeLlmServer;
  const reply = (body: Record<string, unknown>) => ({
    text: `answer from ${String(body['model'])}`,
    usage: { input_tokens: 100, output_tokens: 20 },
  });

  beforeAll(async () => {
    openai = await startOpenAiServer(reply);
    anthropic = await startAnthropicServer(reply);
  });

  afterAll(async () => {
    await openai?.close();
    await anthropic?.close();
  });

  it("runs every case under each variant's provider and model and compares them side by side", async () => {
    const file = join(dir, 'variants.jsonl');
    writeFileSync(
      file,
      [
        JSON.stringify({
          id: 'any',
          task: 'say something',
          provider: 'scripted',
          script: [{ text: 'x' }],
          expect: { contains: 'answer from' },
        }),
        JSON.stringify({
          id: 'gpt-only',
          task: 'name your model',
          model: 'ignored',
          expect: { contains: 'gpt-fake-a' },
        }),
        JSON.stringify({ id: 'third', task: 'once more', expect: { contains: 'answer' } }),
      ].join('\n'),
    );
    const env = cleanEnv({
      OPENAI_API_KEY: 'sk-test',
      OPENAI_BASE_URL: openai.url,
      ANTHROPIC_API_KEY: 'sk-ant-test',
      ANTHROPIC_BASE_URL: anthropic.url,
    });
    const variants = 'openai:gpt-fake-a,anthropic:claude-fake-b';
    const r = await runAgentmesh(['eval', file, '--variants', variants, '--json'], {
      env,
      timeoutMs: 120_000,
    });
    expect(r.stderr).not.toMatch(/error/i);
    expect(r.code).toBe(1);
    expect(openai.requests.map((b) => b['model'])).toEqual(['gpt-fake-a', 'gpt-fake-a', 'gpt-fake-a']);
    expect(anthropic.requests.map((b) => b['model'])).toEqual([
      'claude-fake-b',
      'claude-fake-b',
      'claude-fake-b',
    ]);
    const printed = lines(r.stdout);
    const cases = printed.filter((l) => l['type'] === 'case');
    expect(
      cases.map((c) => `${String(c['id'])} ${String(c['variant'])} ${String(c['pass'])}`).sort(),
    ).toEqual([
      'any anthropic:claude-fake-b true',
      'any openai:gpt-fake-a true',
      'gpt-only anthropic:claude-fake-b false',
      'gpt-only openai:gpt-fake-a true',
      'third anthropic:claude-fake-b true',
      'third openai:gpt-fake-a true',
    ]);
    const summary = printed.at(-1) as { by_variant: Record<string, Record<string, unknown>> };
    expect(summary.by_variant['openai:gpt-fake-a']).toMatchObject({
      total: 3,
      passed: 3,
      pass_rate: 1,
      input_tokens: 300,
      output_tokens: 60,
    });
    expect(summary.by_variant['anthropic:claude-fake-b']).toMatchObject({
      total: 3,
      passed: 2,
      input_tokens: 300,
    });
    const human = await runAgentmesh(['eval', file, '--variants', variants, '--min', '0.5'], {
      env,
      timeoutMs: 120_000,
    });
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/openai:gpt-fake-a\s+3\/3\s+100%\s+\d+ ms\s+\d+ ms\s+360\s/);
    expect(human.stdout).toMatch(/anthropic:claude-fake-b\s+2\/3\s+66\.7%\s+\d+ ms\s+\d+ ms\s+360\s/);
    expect(human.stdout).toContain('gpt-only [anthropic:claude-fake-b] (line 2, run eval-');
  }, 240_000);
});
