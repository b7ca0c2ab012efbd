import { formatCost, formatMs, percent, type EvalReport } from './report.js';

/** Escapes text for HTML element content and quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"'`]/g, (c) => `&#${c.charCodeAt(0)};`);
}

const STYLE = `
body{font:14px/1.45 system-ui,sans-serif;margin:2rem;color:#1d1d1f;background:#fff}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:2rem}
table{border-collapse:collapse;margin:.5rem 0}th,td{border:1px solid #d0d0d7;padding:.3rem .6rem;text-align:left;vertical-align:top}
th{background:#f3f3f6}td.num{text-align:right;font-variant-numeric:tabular-nums}
.pass{color:#0a7a2f;font-weight:600}.fail{color:#b3261e;font-weight:600}
ul{margin:0;padding-left:1.2rem}code,.reason{font-family:ui-monospace,monospace;white-space:pre-wrap;word-break:break-word}
.muted{color:#6b6b75}td.run{white-space:nowrap;font-family:ui-monospace,monospace;font-size:.9em}`;

function cell(text: string, className?: string): string {
  return `<td${className ? ` class="${className}"` : ''}>${escapeHtml(text)}</td>`;
}

function variantRows(report: EvalReport): string {
  return Object.entries(report.summary.by_variant)
    .map(
      ([label, v]) =>
        `<tr>${cell(label)}${cell(`${v.passed}/${v.total}`, 'num')}${cell(percent(v.pass_rate), 'num')}` +
        `${cell(formatMs(v.p50_ms), 'num')}${cell(formatMs(v.p95_ms), 'num')}` +
        `${cell(String(v.input_tokens + v.output_tokens), 'num')}${cell(formatCost(v.cost_usd), 'num')}</tr>`,
    )
    .join('\n');
}

function caseRows(report: EvalReport): string {
  return report.cases
    .map((c) => {
      const reasons =
        c.reasons.length === 0
          ? ''
          : `<ul>${c.reasons.map((r) => `<li class="reason">${escapeHtml(r)}</li>`).join('')}</ul>`;
      return (
        `<tr class="${c.pass ? 'case-pass' : 'case-fail'}" data-case="${escapeHtml(c.id)}">` +
        `${cell(c.id)}${cell(c.variant)}${cell(c.pass ? 'pass' : 'fail', c.pass ? 'pass' : 'fail')}` +
        `${cell(c.status)}${cell(formatMs(c.duration_ms), 'num')}${cell(c.run_id, 'run')}<td>${reasons}</td></tr>`
      );
    })
    .join('\n');
}

function lineErrorRows(report: EvalReport): string {
  return report.line_errors.map((e) => `<tr>${cell(String(e.line), 'num')}${cell(e.error)}</tr>`).join('\n');
}

/**
 * The report as one self-contained HTML page: inline styles, no script, no external asset (its CSP allows none),
 * and every text from the dataset or a run escaped.
 */
export function renderHtml(report: EvalReport): string {
  const s = report.summary;
  const lineErrors =
    report.line_errors.length === 0
      ? ''
      : `<h2>Malformed lines</h2>\n<table id="line-errors"><thead><tr><th>line</th><th>error</th></tr></thead>` +
        `<tbody>${lineErrorRows(report)}</tbody></table>`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>agentmesh eval: ${escapeHtml(report.dataset)}</title>
<style>${STYLE}</style></head>
<body>
<h1>agentmesh eval: <code>${escapeHtml(report.dataset)}</code></h1>
<p id="totals">${s.passed} of ${s.total} passed (${escapeHtml(percent(s.pass_rate))})<span class="muted"> · started ${escapeHtml(report.started_at)}</span></p>
<h2>Variants</h2>
<table id="variants"><thead><tr><th>variant</th><th>passed</th><th>pass rate</th><th>p50</th><th>p95</th><th>tokens</th><th>cost</th></tr></thead>
<tbody>${variantRows(report)}</tbody></table>
<h2>Cases</h2>
<table id="cases"><thead><tr><th>case</th><th>variant</th><th>result</th><th>status</th><th>duration</th><th>run</th><th>reasons</th></tr></thead>
<tbody>${caseRows(report)}</tbody></table>
${lineErrors}
</body></html>
`;
}
