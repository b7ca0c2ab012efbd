import type { RunEvent } from '@agentmesh/protocol';

export interface Writer {
  write(text: string): void;
}

const MAX_INLINE = 160;

/** `1 tool`, `2 tools`. */
export function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`;
}

/** The `{code, message}` of a `run.warning` event, or undefined for any other event. */
export function runWarning(event: RunEvent): { code: string; message: string } | undefined {
  const e = event as { type: string; code?: unknown; message?: unknown };
  if (e.type !== 'run.warning') return undefined;
  return { code: String(e.code ?? 'warning'), message: String(e.message ?? '') };
}

/** Provider aliases (`crypto__sha256`) in a text shown to people, back to canonical names (`crypto.sha256`). */
export function canonicalNames(text: string): string {
  return text.replace(/\b[a-z][a-z0-9_]*(?:__[a-z][a-z0-9_]*)+\b/g, (alias) => alias.split('__').join('.'));
}

/** A message for people: without a leading internal error code (`unavailable: ...`). */
export function withoutCode(message: string): string {
  return message.replace(/^[a-z]+(?:_[a-z]+)*: /, '');
}

function elapsed(from: string | undefined, to: string): number | undefined {
  if (from === undefined) return undefined;
  const ms = Date.parse(to) - Date.parse(from);
  return Number.isFinite(ms) && ms >= 0 ? ms : undefined;
}

function inline(value: unknown): string {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  const flat = (text ?? '').replace(/\s+/g, ' ').trim();
  return flat.length > MAX_INLINE ? `${flat.slice(0, MAX_INLINE)}…` : flat;
}

function ms(value: number): string {
  return value < 10
    ? `${value.toFixed(1)} ms`
    : value < 10_000
      ? `${Math.round(value)} ms`
      : `${(value / 1000).toFixed(1)} s`;
}

interface Palette {
  dim(text: string): string;
  bold(text: string): string;
  red(text: string): string;
  green(text: string): string;
  yellow(text: string): string;
  cyan(text: string): string;
}

function palette(color: boolean): Palette {
  const paint = (code: string) => (text: string) => (color ? `\u001b[${code}m${text}\u001b[0m` : text);
  return {
    dim: paint('2'),
    bold: paint('1'),
    red: paint('31'),
    green: paint('32'),
    yellow: paint('33'),
    cyan: paint('36'),
  };
}

/** What the renderer remembers across the events of one run. */
interface RenderState {
  readonly started: number;
  firstTs: string | undefined;
  readonly notices: string[];
  answer: string;
}

type EventOf<T extends RunEvent['type']> = Extract<RunEvent, { type: T }>;

/** The lines (newline-terminated, possibly empty) one event of each type prints. */
type LineFormatters = {
  [T in RunEvent['type']]?: (event: EventOf<T>, p: Palette, state: RenderState) => string;
};

function completedLine(event: EventOf<'run.completed'>, p: Palette, state: RenderState): string {
  const ok = event.status === 'done';
  const head = ok ? p.green(`✔ ${event.status}`) : p.red(`✘ ${event.status}`);
  const took = elapsed(state.firstTs, event.ts) ?? Date.now() - state.started;
  const cost = event.cost_usd === undefined ? '' : `, $${event.cost_usd.toFixed(4)}`;
  const summary = `${plural(event.iterations, 'turn')}, ${plural(event.tool_calls, 'tool call')}, ${ms(took)}${cost}`;
  const reason = event.reason === undefined ? undefined : withoutCode(event.reason);
  const told = reason !== undefined && state.notices.some((n) => reason.includes(withoutCode(n)));
  const text = event.text.trim() === '' ? '' : `${event.text.trim()}\n`;
  return `${head} ${p.dim(`(${summary}${reason && !told ? `; ${reason}` : ''})`)}\n${text}`;
}

function toolCompletedLine(event: EventOf<'tool.completed'>, p: Palette): string {
  const mark = event.is_error ? p.red('✗') : p.green('✓');
  const preview = inline(event.name === 'tool_search' ? canonicalNames(event.preview) : event.preview);
  const artifact = event.artifact ? p.dim(` (artifact ${event.artifact.ref}, ${event.artifact.size} B)`) : '';
  return `  ${mark} ${event.name} ${p.dim(ms(event.elapsed_ms))} → ${preview}${artifact}\n`;
}

const RUN_LINES: LineFormatters = {
  'run.accepted': (event, p) =>
    `${p.bold('▶ run')} ${event.run_id} ${p.dim(`(${[event.provider, event.model].filter(Boolean).join(' ') || 'default provider'})`)}\n` +
    `  task: ${inline(event.task)}\n` +
    (event.forked_from
      ? p.dim(`  forked from ${event.forked_from.run_id} after seq ${event.forked_from.seq}\n`)
      : ''),
  'run.started': (event, p) => (event.resumed ? p.dim(`  resumed on planner ${event.planner_id}\n`) : ''),
  'llm.request': (event, p) =>
    `${p.cyan(`● turn ${event.iteration}`)} ${p.dim(`asking the model with ${plural(event.tools.length, 'tool')}`)}\n`,
  'llm.response': (event, p, state) => {
    state.answer = event.text;
    if (event.tool_calls.length === 0) return '';
    const said = event.text.trim() === '' ? '' : `  ${p.dim('model:')} ${inline(event.text)}\n`;
    return `${said}  ${p.dim(`model calls ${plural(event.tool_calls.length, 'tool')}`)}\n`;
  },
  'run.notice': (event, p, state) => {
    state.notices.push(event.message);
    return `  ${p.yellow('!')} ${event.message}\n`;
  },
  'run.completed': completedLine,
  'run.failed': (event, p) => `${p.red('✘ failed')}: ${withoutCode(event.error.message)}\n`,
  'run.input': (event, p) => `  ${p.cyan('»')} input: ${inline(event.text)}\n`,
  'run.paused': (_event, p) => `  ${p.yellow('‖')} paused\n`,
  'run.resumed': (_event, p) => `  ${p.yellow('‖')} resumed\n`,
  'guardrail.tripped': (event, p) => {
    const did = event.action === 'redact' ? `redacted ${event.count ?? 1}x` : 'blocked';
    const where = event.call_id === undefined ? event.stage : `${event.stage} [${event.call_id}]`;
    return `  ${p.yellow('⛨')} guardrail ${event.rule} ${did} ${p.dim(`(${where})`)}
`;
  },
  'session.compacted': (event, p) =>
    `  ${p.dim(`session compacted: ${event.before_tokens} → ${event.after_tokens} tokens`)}\n`,
};

const TOOL_LINES: LineFormatters = {
  'tool.search': (event, p) =>
    `  ${p.cyan('⌕')} tool_search ${JSON.stringify(event.query)} → ${event.results.join(', ') || 'no match'}\n`,
  'tool.started': (event, p) =>
    `  ${p.cyan('⚙')} ${event.name} ${p.dim(`[${event.call_id}] on ${event.worker_id}`)}\n`,
  'tool.progress': (event, p) => `    ${p.dim(`${event.name}: ${event.message ?? inline(event.data)}`)}\n`,
  'tool.completed': toolCompletedLine,
  'tool.failed': (event, p) =>
    `  ${p.red('✗')} ${event.name} ${p.dim(ms(event.elapsed_ms))} ${p.red(event.error.code)}: ${inline(event.error.message)}\n`,
  'approval.requested': (event, p) =>
    `  ${p.yellow('?')} approval ${event.approval_id}: ${inline(event.summary)}\n`,
  'approval.decided': (event, p) => {
    const approved = event.decision === 'approve';
    const reason = event.reason ? `: ${event.reason}` : '';
    return `  ${approved ? p.green('✓') : p.red('✗')} ${event.approval_id} ${approved ? 'approved' : 'denied'} by ${event.by}${reason}\n`;
  },
};

const AGENT_LINES: LineFormatters = {
  'agent.started': (event, p) => `    ${p.dim(`↳ child run ${event.child_run_id} [${event.call_id}]`)}\n`,
  'agent.completed': (event, p) => `    ${p.dim(`↳ child run ${event.child_run_id} ${event.status}`)}\n`,
  'skill.activated': (event, p) => `  ${p.cyan('✦')} skill ${event.name} ${p.dim(`(${event.reason})`)}\n`,
  'skill.deactivated': (event, p) => `  ${p.dim(`✦ skill ${event.name} deactivated`)}\n`,
  'daemon.idle': (event, p, state) =>
    (state.answer.trim() === '' ? '' : `${state.answer.trim()}\n`) +
    `${p.dim(`◌ idle, ${plural(event.queue_depth, 'trigger')} queued`)}\n`,
  'daemon.woken': (event, p) =>
    `${p.cyan('◉ woken')} ${p.dim(`by ${event.reason}`)}${event.trigger ? ` ${inline(event.trigger)}` : ''}\n`,
};

const LINES: LineFormatters = { ...RUN_LINES, ...TOOL_LINES, ...AGENT_LINES };

/** Live, human-readable progress of a run: turns, tool calls, results, the final answer. */
export function createHumanRenderer(out: Writer, options: { color?: boolean } = {}) {
  const p = palette(options.color ?? false);
  const state: RenderState = { started: Date.now(), firstTs: undefined, notices: [], answer: '' };
  return (event: RunEvent): void => {
    state.firstTs ??= event.ts;
    const warning = runWarning(event);
    if (warning) {
      out.write(`  ${p.yellow('!')} warning: ${warning.message}\n`);
      return;
    }
    const format = LINES[event.type] as ((e: RunEvent, p: Palette, s: RenderState) => string) | undefined;
    const text = format?.(event, p, state) ?? '';
    if (text !== '') out.write(text);
  };
}
