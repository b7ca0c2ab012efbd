import type { Usage } from '@agentmesh/protocol';
import { formatTable } from '../table.js';
import type { LineError } from './cases.js';
import type { CaseResult, Variant } from './runner.js';

/** The figures of one variant. */
export interface VariantSummary {
  total: number;
  passed: number;
  failed: number;
  pass_rate: number;
  p50_ms: number;
  p95_ms: number;
  input_tokens: number;
  output_tokens: number;
  /** Summed over the runs whose cost is known; null when none is. */
  cost_usd: number | null;
}

/** The `summary` line of `--json` (malformed lines count as failed cases). */
export interface EvalSummary {
  type: 'summary';
  total: number;
  passed: number;
  failed: number;
  pass_rate: number;
  malformed: number;
  by_variant: Record<string, VariantSummary>;
}

/** One `case` line of `--json`. */
export interface CaseLine {
  type: 'case';
  id: string;
  variant: string;
  pass: boolean;
  reasons: string[];
  run_id: string;
  duration_ms: number;
  usage: Usage;
  cost_usd: number | null;
}

/** The `line_error` line of `--json`: a line of the dataset that is not a case. */
export interface LineErrorLine {
  type: 'line_error';
  line: number;
  error: string;
}

/** What `--out DIR` writes as report.json (and renders as report.html). */
export interface EvalReport {
  dataset: string;
  started_at: string;
  variants: string[];
  summary: EvalSummary;
  cases: (CaseLine & { line: number; task: string; status: string; planner_id?: string })[];
  line_errors: LineErrorLine[];
}

export function caseLine(r: CaseResult): CaseLine {
  return {
    type: 'case',
    id: r.case.id,
    variant: r.variant,
    pass: r.pass,
    reasons: r.reasons,
    run_id: r.outcome.run_id,
    duration_ms: r.outcome.duration_ms,
    usage: r.outcome.usage,
    cost_usd: r.outcome.cost_usd ?? null,
  };
}

export function lineErrorLine(e: LineError): LineErrorLine {
  return { type: 'line_error', line: e.line, error: e.message };
}

/** The value at quantile `q` (0..1) of sorted numbers, nearest rank; 0 for none. */
export function percentile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return 0;
  const rank = Math.ceil(q * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!;
}

function rate(passed: number, total: number): number {
  return total === 0 ? 0 : Math.round((passed / total) * 10_000) / 10_000;
}

function summarizeVariant(results: readonly CaseResult[], malformed: number): VariantSummary {
  const durations = results.map((r) => r.outcome.duration_ms).sort((a, b) => a - b);
  const costs = results.flatMap((r) => (r.outcome.cost_usd === undefined ? [] : [r.outcome.cost_usd]));
  const passed = results.filter((r) => r.pass).length;
  const total = results.length + malformed;
  return {
    total,
    passed,
    failed: total - passed,
    pass_rate: rate(passed, total),
    p50_ms: percentile(durations, 0.5),
    p95_ms: percentile(durations, 0.95),
    input_tokens: results.reduce((n, r) => n + r.outcome.usage.input_tokens, 0),
    output_tokens: results.reduce((n, r) => n + r.outcome.usage.output_tokens, 0),
    cost_usd: costs.length === 0 ? null : Math.round(costs.reduce((a, b) => a + b, 0) * 1e6) / 1e6,
  };
}

/**
 * The summary of an eval. Each malformed line counts as one failed case under every variant, so a dataset with a
 * broken line never reaches a pass rate of 1.
 */
export function summarize(
  results: readonly CaseResult[],
  variants: readonly Variant[],
  lineErrors: readonly LineError[],
): EvalSummary {
  const malformed = lineErrors.length * variants.length;
  const passed = results.filter((r) => r.pass).length;
  const total = results.length + malformed;
  const byVariant: Record<string, VariantSummary> = {};
  for (const v of variants)
    byVariant[v.label] = summarizeVariant(
      results.filter((r) => r.variant === v.label),
      lineErrors.length,
    );
  return {
    type: 'summary',
    total,
    passed,
    failed: total - passed,
    pass_rate: rate(passed, total),
    malformed: lineErrors.length,
    by_variant: byVariant,
  };
}

export function formatMs(ms: number): string {
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
}

export function formatCost(cost: number | null): string {
  if (cost === null) return '-';
  return cost === 0 ? '$0' : `$${cost.toFixed(cost < 0.01 ? 6 : 4)}`;
}

export function percent(r: number): string {
  return `${(r * 100).toFixed(r === 1 || r === 0 ? 0 : 1)}%`;
}

/** The side-by-side table of variants: one row each. */
export function variantTable(summary: EvalSummary): string {
  const rows = Object.entries(summary.by_variant).map(([label, v]) => [
    label,
    `${v.passed}/${v.total}`,
    percent(v.pass_rate),
    formatMs(v.p50_ms),
    formatMs(v.p95_ms),
    String(v.input_tokens + v.output_tokens),
    formatCost(v.cost_usd),
  ]);
  return formatTable(['variant', 'passed', 'pass rate', 'p50', 'p95', 'tokens', 'cost'], rows);
}

/** Strips terminal control characters from hostile text before it reaches a terminal. */
export function printable(text: string): string {
  return text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, '?');
}

/** The human report: the table, every failing case with its reasons, the malformed lines, and the totals. */
export function humanReport(
  results: readonly CaseResult[],
  summary: EvalSummary,
  lineErrors: readonly LineError[],
): string {
  const out = [variantTable(summary)];
  const failing = results.filter((r) => !r.pass);
  const many = Object.keys(summary.by_variant).length > 1;
  if (failing.length > 0) out.push('\nfailing cases:\n');
  for (const r of failing) {
    const where = many ? ` [${r.variant}]` : '';
    out.push(`  ${printable(r.case.id)}${where} (line ${r.case.line}, run ${r.outcome.run_id})\n`);
    for (const reason of r.reasons) out.push(`    - ${printable(reason)}\n`);
  }
  if (lineErrors.length > 0) out.push('\nmalformed lines:\n');
  for (const e of lineErrors) out.push(`  line ${e.line}: ${printable(e.message)}\n`);
  out.push(
    `\n${summary.passed} of ${summary.total} passed (${percent(summary.pass_rate)})` +
      `${summary.malformed > 0 ? `, ${summary.malformed} malformed line${summary.malformed === 1 ? '' : 's'}` : ''}\n`,
  );
  return out.join('');
}

export function buildReport(
  dataset: string,
  startedAt: Date,
  variants: readonly Variant[],
  results: readonly CaseResult[],
  lineErrors: readonly LineError[],
): EvalReport {
  return {
    dataset,
    started_at: startedAt.toISOString(),
    variants: variants.map((v) => v.label),
    summary: summarize(results, variants, lineErrors),
    cases: results.map((r) => ({
      ...caseLine(r),
      line: r.case.line,
      task: r.case.request.task,
      status: r.outcome.status,
      ...(r.outcome.planner_id === undefined ? {} : { planner_id: r.outcome.planner_id }),
    })),
    line_errors: lineErrors.map(lineErrorLine),
  };
}
