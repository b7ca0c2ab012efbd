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

/** Live, human-readable progress of a run: turns, tool calls, results, the final answer. */
export function createHumanRenderer(out: Writer, options: { color?: boolean } = {}) {
  const c = options.color ?? false;
  const paint = (code: string, text: string) => (c ? `\u001b[${code}m${text}\u001b[0m` : text);
  const dim = (t: string) => paint('2', t);
  const green = (t: string) => paint('32', t);
  const red = (t: string) => paint('31', t);
  const cyan = (t: string) => paint('36', t);
  const bold = (t: string) => paint('1', t);
  const started = Date.now();
  let firstTs: string | undefined;
  const notices: string[] = [];
  let answer = '';

  return (event: RunEvent): void => {
    firstTs ??= event.ts;
    const warning = runWarning(event);
    if (warning) {
      out.write(`  ${paint('33', '!')} warning: ${warning.message}\n`);
      return;
    }
    switch (event.type) {
      case 'run.accepted':
        out.write(
          `${bold('▶ run')} ${event.run_id} ${dim(`(${[event.provider, event.model].filter(Boolean).join(' ') || 'default provider'})`)}\n`,
        );
        out.write(`  task: ${inline(event.task)}\n`);
        break;
      case 'run.started':
        if (event.resumed) out.write(dim(`  resumed on planner ${event.planner_id}\n`));
        break;
      case 'llm.request':
        out.write(
          `${cyan(`● turn ${event.iteration}`)} ${dim(`asking the model with ${plural(event.tools.length, 'tool')}`)}\n`,
        );
        break;
      case 'llm.response':
        answer = event.text;
        if (event.text.trim() !== '' && event.tool_calls.length > 0)
          out.write(`  ${dim('model:')} ${inline(event.text)}\n`);
        if (event.tool_calls.length > 0)
          out.write(`  ${dim(`model calls ${plural(event.tool_calls.length, 'tool')}`)}\n`);
        break;
      case 'tool.search':
        out.write(
          `  ${cyan('⌕')} tool_search ${JSON.stringify(event.query)} → ${event.results.join(', ') || 'no match'}\n`,
        );
        break;
      case 'tool.started':
        out.write(`  ${cyan('⚙')} ${event.name} ${dim(`[${event.call_id}] on ${event.worker_id}`)}\n`);
        break;
      case 'tool.progress':
        out.write(`    ${dim(`${event.name}: ${event.message ?? inline(event.data)}`)}\n`);
        break;
      case 'tool.completed':
        out.write(
          `  ${event.is_error ? red('✗') : green('✓')} ${event.name} ${dim(ms(event.elapsed_ms))} → ${inline(event.name === 'tool_search' ? canonicalNames(event.preview) : event.preview)}${event.artifact ? dim(` (artifact ${event.artifact.ref}, ${event.artifact.size} B)`) : ''}\n`,
        );
        break;
      case 'tool.failed':
        out.write(
          `  ${red('✗')} ${event.name} ${dim(ms(event.elapsed_ms))} ${red(event.error.code)}: ${inline(event.error.message)}\n`,
        );
        break;
      case 'run.notice':
        notices.push(event.message);
        out.write(`  ${paint('33', '!')} ${event.message}\n`);
        break;
      case 'run.completed': {
        const ok = event.status === 'done';
        const head = ok ? green(`✔ ${event.status}`) : red(`✘ ${event.status}`);
        const took = elapsed(firstTs, event.ts) ?? Date.now() - started;
        const cost = event.cost_usd === undefined ? '' : `, $${event.cost_usd.toFixed(4)}`;
        const summary = `${plural(event.iterations, 'turn')}, ${plural(event.tool_calls, 'tool call')}, ${ms(took)}${cost}`;
        const reason = event.reason === undefined ? undefined : withoutCode(event.reason);
        const told = reason !== undefined && notices.some((n) => reason.includes(withoutCode(n)));
        out.write(`${head} ${dim(`(${summary}${reason && !told ? `; ${reason}` : ''})`)}\n`);
        if (event.text.trim() !== '') out.write(`${event.text.trim()}\n`);
        break;
      }
      case 'run.failed':
        out.write(`${red('✘ failed')}: ${withoutCode(event.error.message)}\n`);
        break;
      case 'approval.requested':
        out.write(`  ${paint('33', '?')} approval ${event.approval_id}: ${inline(event.summary)}\n`);
        break;
      case 'approval.decided':
        out.write(
          `  ${event.decision === 'approve' ? green('✓') : red('✗')} ${event.approval_id} ${event.decision === 'approve' ? 'approved' : 'denied'} by ${event.by}${event.reason ? `: ${event.reason}` : ''}\n`,
        );
        break;
      case 'run.input':
        out.write(`  ${paint('36', '»')} input: ${inline(event.text)}\n`);
        break;
      case 'run.paused':
      case 'run.resumed':
        out.write(`  ${paint('33', '‖')} ${event.type === 'run.paused' ? 'paused' : 'resumed'}\n`);
        break;
      case 'session.compacted':
        out.write(`  ${dim(`session compacted: ${event.before_tokens} → ${event.after_tokens} tokens`)}\n`);
        break;
      case 'agent.started':
        out.write(`    ${dim(`↳ child run ${event.child_run_id} [${event.call_id}]`)}\n`);
        break;
      case 'agent.completed':
        out.write(`    ${dim(`↳ child run ${event.child_run_id} ${event.status}`)}\n`);
        break;
      case 'skill.activated':
        out.write(`  ${cyan('✦')} skill ${event.name} ${dim(`(${event.reason})`)}\n`);
        break;
      case 'skill.deactivated':
        out.write(`  ${dim(`✦ skill ${event.name} deactivated`)}\n`);
        break;
      case 'daemon.idle':
        if (answer.trim() !== '') out.write(`${answer.trim()}\n`);
        out.write(`${dim(`◌ idle, ${plural(event.queue_depth, 'trigger')} queued`)}\n`);
        break;
      case 'daemon.woken':
        out.write(
          `${cyan('◉ woken')} ${dim(`by ${event.reason}`)}${event.trigger ? ` ${inline(event.trigger)}` : ''}\n`,
        );
        break;
    }
  };
}
