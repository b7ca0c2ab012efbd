import { toErrorPayload } from '@agentmesh/protocol';
import type { Guardrails } from '@agentmesh/protocol';
import { modelJudge } from '../guardrail-judge.js';
import type { ModelProvider } from '../providers/types.js';
import {
  compileGuardrails,
  inputMatch,
  toolMatch,
  tripwireError,
  type JudgeRule,
  type TextRule,
  type ToolRule,
} from '../guardrail-rules.js';
import type { ModelTurn } from '../providers/types.js';

type NativeBlocks = NonNullable<ModelTurn['native']>;
import { StreamRedactor, type RedactorStep } from '../stream-redactor.js';
import type { RunContext } from './context.js';
import type { RunGuardrails } from './ports.js';

export type { RunGuardrails } from './ports.js';

/**
 * A run's guardrails from its merged rules, undefined when it has none. Each judge's provider is made at once, from
 * the rule's own provider, model and base URL (the planner's defaults for what it leaves out), so a judge the
 * planner may not use (a base URL it does not allow, a model without a key) fails the run at its start.
 */
export function runGuardrails(
  rules: Guardrails | undefined,
  makeProvider: (rule: JudgeRule['rule']) => ModelProvider,
): RunGuardrails | undefined {
  const set = rules === undefined || !hasRules(rules) ? undefined : compileGuardrails(rules);
  if (set === undefined || set.empty) return undefined;
  const providers = new Map(set.judges.map((j) => [j.name, makeProvider(j.rule)] as const));
  return { set, judge: modelJudge((rule) => providers.get(rule.name)!) };
}

/** Whether any stage holds a rule: a run without rules compiles nothing. */
function hasRules(rules: Guardrails): boolean {
  return (rules.input?.length ?? 0) + (rules.output?.length ?? 0) + (rules.tools?.length ?? 0) > 0;
}

/** Judges still deciding beside a turn; the turn publishes nothing of its own until they pass. */
export type PendingJudgement = { verdict: Promise<void> } | undefined;

/** Planner-made messages (nudges, repair requests) are not input: they are marked checked as they are added. */
export function markInputChecked(ctx: RunContext): void {
  if (ctx.state.guard_checked !== undefined) ctx.state.guard_checked = ctx.state.messages.length;
}

/**
 * Checks the user messages added since the last turn (the task, inputs, a daemon's wakes) before any model sees
 * them: a matching regex rule or a blocking judge ends the run (`guardrail.tripped`, then `guardrail_tripwire`).
 * Judges that are not blocking are started and returned: the turn runs beside them, and the messages count as
 * checked (in the checkpointed snapshot) only once they allow.
 */
export async function guardInputs(ctx: RunContext): Promise<PendingJudgement> {
  const guard = ctx.env.guardrails;
  const { state } = ctx;
  if (guard === undefined || state.guard_checked === undefined) return undefined;
  const upTo = state.messages.length;
  const texts = state.messages
    .slice(state.guard_checked)
    .flatMap((m) => (m.role === 'user' ? [m.content] : []));
  for (const text of texts) {
    const rule = inputMatch(guard.set, text);
    if (rule) throw trip(ctx, rule.name, 'input');
  }
  const judges = texts.length === 0 ? [] : guard.set.judges.filter((j) => j.stage === 'input');
  const joined = texts.join('\n\n');
  await judged(
    ctx,
    judgeAll(
      ctx,
      judges.filter((j) => j.blocking),
      joined,
      ctx.signal,
    ),
  );
  const parallel = judges.filter((j) => !j.blocking);
  if (parallel.length === 0) {
    state.guard_checked = upTo;
    return undefined;
  }
  const verdict = judgeAll(ctx, parallel, joined, ctx.signal).then(() => {
    state.guard_checked = upTo;
  });
  verdict.catch(() => undefined); // awaited by the turn; a run that ends before its turn drops it unpublished
  return { verdict };
}

/** A judge said BLOCK (or failed): nothing is published until whoever awaits the verdict calls {@link judged}. */
class JudgeTripped extends Error {
  constructor(
    readonly rule: JudgeRule,
    readonly why: string,
  ) {
    super(why);
  }
}

/** Awaits judges; a trip is published (`guardrail.tripped`) and thrown as `guardrail_tripwire`. */
export async function judged(ctx: RunContext, verdict: Promise<void>): Promise<void> {
  try {
    await verdict;
  } catch (error) {
    if (error instanceof JudgeTripped) throw trip(ctx, error.rule.name, error.rule.stage, error.why);
    throw error;
  }
}

/** Asks each judge; the first that trips (or fails: a guardrail fails closed) rejects with {@link JudgeTripped}. */
async function judgeAll(
  ctx: RunContext,
  judges: readonly JudgeRule[],
  text: string,
  signal: AbortSignal,
): Promise<void> {
  if (judges.length === 0) return;
  const judge = ctx.env.guardrails!.judge;
  await Promise.all(
    judges.map(async (rule) => {
      let verdict;
      try {
        verdict = await judge(rule, text, signal);
      } catch (error) {
        if (signal.aborted) throw error;
        verdict = { trip: true, reason: `the judge failed (${toErrorPayload(error).message})` };
      }
      if (verdict.trip) throw new JudgeTripped(rule, verdict.reason);
    }),
  );
}

/**
 * Publishes `guardrail.tripped` for a block and returns the error that ends the run. Blocked input leaves the
 * transcript (the messages no rule has passed yet), so a session continued later never carries it to a model.
 */
export function trip(ctx: RunContext, rule: string, stage: 'input' | 'output', why?: string): Error {
  const { state } = ctx;
  if (stage === 'input' && state.guard_checked !== undefined) state.messages.length = state.guard_checked;
  ctx.sink.emit({ type: 'guardrail.tripped', rule, stage, action: 'block' });
  ctx.log.warn({ rule, stage, why }, 'guardrail tripped');
  return tripwireError(rule, stage, why);
}

/**
 * The provider-native blocks of a turn (sent back verbatim on the next request, kept in the transcript) with their
 * answer text redacted: Anthropic `text` blocks and OpenAI Responses `output_text` parts. Signed thinking blocks and
 * encrypted reasoning stay as they are: the APIs refuse altered ones.
 */
export function redactNative(native: NativeBlocks, rules: readonly TextRule[]): NativeBlocks {
  if (rules.length === 0) return native;
  const redact = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(redact);
    if (value === null || typeof value !== 'object') return value;
    const block = value as Record<string, unknown>;
    const out: Record<string, unknown> = {};
    for (const [key, v] of Object.entries(block))
      out[key] =
        key === 'text' &&
        typeof v === 'string' &&
        (block['type'] === 'text' || block['type'] === 'output_text')
          ? StreamRedactor.redact(rules, v).text
          : redact(v);
    return out;
  };
  return { ...native, blocks: native.blocks.map(redact) };
}

/** The tool rule that refuses this call, if any. */
export function guardTool(ctx: RunContext, name: string, args: unknown): ToolRule | undefined {
  const guard = ctx.env.guardrails;
  return guard === undefined ? undefined : toolMatch(guard.set, name, args);
}

/**
 * One model turn's output under the run's rules: each streamed delta goes through a {@link StreamRedactor} (one per
 * kind) before it is published, and while a judge is still deciding (an input judge beside the turn, or any output
 * judge, which needs the whole text) nothing is published: it waits in `held` until the judges pass.
 */
export class TurnGuard {
  private readonly redactors = new Map<'text' | 'reasoning', StreamRedactor>();
  private held: { kind: 'text' | 'reasoning'; text: string }[] | undefined;
  /** Set when a block rule matched: the turn is cancelled. */
  blockedBy: string | undefined;

  constructor(
    private readonly ctx: RunContext,
    private readonly guard: RunGuardrails,
    private readonly publish: (kind: 'text' | 'reasoning', text: string) => void,
    private readonly onBlock: () => void,
    holdAll: boolean,
  ) {
    this.held = holdAll || guard.set.judges.some((j) => j.stage === 'output') ? [] : undefined;
  }

  delta(kind: 'text' | 'reasoning', text: string): void {
    if (this.blockedBy !== undefined) return;
    this.out(kind, this.redactor(kind).push(text));
  }

  /**
   * The end of the turn: the rest of each stream goes out, and the turn's whole text is redacted on its own (it
   * may differ from what streamed: a text tool protocol takes its calls out of it). Returns the redacted text.
   */
  end(rawText: string): string {
    for (const [kind, redactor] of this.redactors) this.out(kind, redactor.end());
    const whole = StreamRedactor.redact(this.guard.set.output, rawText);
    if (whole.redactor.blocked) this.block(whole.redactor.blocked.name);
    if (this.blockedBy !== undefined) return whole.text;
    this.noteRedactions(whole.redactor);
    const reasoning = this.redactors.get('reasoning');
    if (reasoning) this.noteRedactions(reasoning);
    return whole.text;
  }

  /** Output judges decide on the turn's redacted text. */
  async judgeOutput(text: string): Promise<void> {
    const judges = this.guard.set.judges.filter((j) => j.stage === 'output');
    if (judges.length === 0 || text.trim() === '') return;
    await judged(this.ctx, judgeAll(this.ctx, judges, text, this.ctx.signal));
  }

  /** The judges passed: what waited is published. */
  release(): void {
    const held = this.held ?? [];
    this.held = undefined;
    for (const piece of held) this.publish(piece.kind, piece.text);
  }

  private redactor(kind: 'text' | 'reasoning'): StreamRedactor {
    let r = this.redactors.get(kind);
    if (r === undefined) this.redactors.set(kind, (r = new StreamRedactor(this.guard.set.output)));
    return r;
  }

  private out(kind: 'text' | 'reasoning', step: RedactorStep): void {
    if (step.blocked) return this.block(step.blocked.name);
    if (step.text === '' || this.blockedBy !== undefined) return;
    if (this.held) this.held.push({ kind, text: step.text });
    else this.publish(kind, step.text);
  }

  private block(rule: string): void {
    if (this.blockedBy !== undefined) return;
    this.blockedBy = rule;
    this.held = [];
    this.onBlock();
  }

  private noteRedactions(redactor: StreamRedactor): void {
    for (const { rule, count } of redactor.counts.values())
      this.ctx.sink.emit({
        type: 'guardrail.tripped',
        rule: rule.name,
        stage: 'output',
        action: 'redact',
        count,
      });
  }
}
