import { describe, expect, it } from 'vitest';
import { parseDataset } from './cases.js';
import type { CaseOutcome } from './checks.js';
import { escapeHtml, renderHtml } from './html.js';
import { buildReport, caseLine, humanReport, percentile, printable, summarize } from './report.js';
import { parseVariants, type CaseResult } from './runner.js';

const { cases, errors } = parseDataset(
  [
    JSON.stringify({ id: 'fine', task: 't', expect: {} }),
    'oops',
    JSON.stringify({ id: '<img src=x onerror=alert(1)>', task: '</td><script>x()</script>', expect: {} }),
  ].join('\n'),
);

function result(index: number, variant: string, pass: boolean, extra: Partial<CaseOutcome> = {}): CaseResult {
  return {
    case: cases[index]!,
    variant,
    pass,
    reasons: pass ? [] : ['contains: the final text lacks "<b>4</b>"'],
    outcome: {
      run_id: `run-${variant}-${index}`,
      status: 'done',
      text: '',
      turns: 1,
      tool_calls: 0,
      tools_called: [],
      usage: { input_tokens: 10, output_tokens: 5 },
      duration_ms: 100,
      ...extra,
    },
  };
}

const variants = parseVariants('openai:a,anthropic:b');
const results = [
  result(0, 'openai:a', true, { duration_ms: 100, cost_usd: 0.01 }),
  result(0, 'anthropic:b', true, { duration_ms: 300 }),
  result(1, 'openai:a', false, { duration_ms: 900, cost_usd: 0.02 }),
  result(1, 'anthropic:b', true, { duration_ms: 500 }),
];

describe('eval report', () => {
  it('percentile is nearest-rank', () => {
    expect(percentile([], 0.5)).toBe(0);
    expect(percentile([5], 0.95)).toBe(5);
    expect(percentile([1, 2, 3, 4], 0.5)).toBe(2);
    expect(
      percentile(
        [...Array(100).keys()].map((i) => i + 1),
        0.95,
      ),
    ).toBe(95);
  });

  it('summarizes per variant; a malformed line is one failed case under each variant', () => {
    const summary = summarize(results, variants, errors);
    expect(summary).toMatchObject({
      type: 'summary',
      total: 6,
      passed: 3,
      failed: 3,
      pass_rate: 0.5,
      malformed: 1,
    });
    expect(summary.by_variant['openai:a']).toEqual({
      total: 3,
      passed: 1,
      failed: 2,
      pass_rate: 0.3333,
      p50_ms: 100,
      p95_ms: 900,
      input_tokens: 20,
      output_tokens: 10,
      cost_usd: 0.03,
    });
    expect(summary.by_variant['anthropic:b']).toMatchObject({
      passed: 2,
      p50_ms: 300,
      p95_ms: 500,
      cost_usd: null,
    });
  });

  it('a case line has exactly the documented fields', () => {
    expect(caseLine(results[2]!)).toEqual({
      type: 'case',
      id: '<img src=x onerror=alert(1)>',
      variant: 'openai:a',
      pass: false,
      reasons: ['contains: the final text lacks "<b>4</b>"'],
      run_id: 'run-openai:a-1',
      duration_ms: 900,
      usage: { input_tokens: 10, output_tokens: 5 },
      cost_usd: 0.02,
    });
  });

  it('the human report has the table, each failing case with its reasons, and the malformed lines', () => {
    const text = humanReport(results, summarize(results, variants, errors), errors);
    expect(text).toMatch(/variant\s+passed\s+pass rate\s+p50\s+p95\s+tokens\s+cost/);
    expect(text).toMatch(/openai:a\s+1\/3\s+33\.3%\s+100 ms\s+900 ms\s+30\s+\$0\.0300/);
    expect(text).toContain('<img src=x onerror=alert(1)> [openai:a] (line 3, run run-openai:a-1)');
    expect(text).toContain('    - contains: the final text lacks "<b>4</b>"');
    expect(text).toContain('line 2: not valid JSON');
    expect(text).toContain('3 of 6 passed (50.0%), 1 malformed line');
  });

  it('strips terminal escapes from hostile text', () => {
    expect(printable('ok\u001b]0;pwned\u0007\u009b2J')).toBe('ok?]0;pwned??2J');
  });

  it('the HTML escapes every text of the dataset and loads nothing', () => {
    expect(escapeHtml(`<a href="x" title='y'>&\``)).toBe(
      '&#60;a href=&#34;x&#34; title=&#39;y&#39;&#62;&#38;&#96;',
    );
    const html = renderHtml(buildReport('<d>.jsonl', new Date(0), variants, results, errors));
    expect(html).not.toMatch(/<script|<img|onerror=alert\(1\)>/);
    expect(html).toContain('&#60;img src=x onerror=alert(1)&#62;');
    expect(html).toContain("default-src 'none'");
    expect(html).not.toMatch(/<(link|iframe|object|embed)\b|url\(|@import/i);
  });
});
