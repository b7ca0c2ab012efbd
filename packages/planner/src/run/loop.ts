import { matchesAnyToolPattern, toErrorPayload, type RunEventOf, type RunStatus } from '@agentmesh/protocol';
import { checkOutput, invalidOutputError, repairMessage } from '../output-schema.js';
import type { RunContext } from './context.js';
import { dispatchTools } from './dispatch.js';
import { notice, runCompleted } from './events.js';
import { guardInputs, markInputChecked } from './guard.js';
import { modelTurn } from './turn.js';

export const DEFAULT_NUDGE =
  'You have not finished: there is no final answer yet. Continue the task, using your tools where they help, and ' +
  'reply with the final answer as text when the task is complete.';

type CompletedEvent = RunEventOf<'run.completed'>;
type Ending = { status: RunStatus; reason: string };

/**
 * The agent loop of one run: model turn, tool dispatch, repeat, until a final status. All of its state lives in the
 * context's snapshot, checkpointed after each model turn and each batch of tool results, so it can continue from
 * any checkpoint (phase `model` or `tools`).
 */
export async function runLoop(ctx: RunContext): Promise<CompletedEvent> {
  try {
    for (;;) {
      const ending = ctx.stopCheck() ?? (await step(ctx));
      if (ending) return finish(ctx, ending);
    }
  } catch (error) {
    const stop = ctx.stopCheck();
    if (stop) return finish(ctx, stop);
    const payload = toErrorPayload(error);
    ctx.log.warn({ code: payload.code, err: payload.message }, 'run failed');
    ctx.sink.emit(notice('error', payload.message, { code: payload.code }));
    return finish(ctx, { status: 'failed', reason: `${payload.code}: ${payload.message}` });
  }
}

/** One step: the tool calls of the last turn when they are due, otherwise a model turn. */
async function step(ctx: RunContext): Promise<Ending | undefined> {
  const { state, limits } = ctx;
  if (state.phase === 'tools') {
    const last = state.messages[state.messages.length - 1];
    const outcome = await dispatchTools(ctx, last?.role === 'assistant' ? (last.tool_calls ?? []) : []);
    state.phase = 'model';
    await ctx.checkpoint();
    const stop = ctx.stopCheck();
    if (stop) return stop;
    if (outcome.budgetHit)
      return { status: 'budget_exhausted', reason: `max_tool_calls (${limits.max_tool_calls}) reached` };
    if (outcome.stopAfter !== undefined)
      return { status: 'done', reason: `stop_after_successful_tools: ${outcome.stopAfter} succeeded` };
    return undefined;
  }
  if (ctx.daemon?.idle) {
    const ending = await ctx.daemon.wake(ctx);
    if (ending) return ending;
  }
  await ctx.env.hitl?.applyControls(ctx);
  const judging = await guardInputs(ctx);
  const budget = budgetCheck(ctx);
  if (budget) return { status: 'budget_exhausted', reason: budget };
  const spent = await ctx.env.quota?.exhausted(ctx.signal);
  if (spent !== undefined) return { status: 'budget_exhausted', reason: spent };
  if (ctx.skills) await ctx.skills.beforeTurn(ctx);
  const turn = await modelTurn(ctx, judging);
  if (turn.tool_calls.length > 0) {
    state.nudges = 0;
    state.phase = 'tools';
    await ctx.checkpoint();
    return undefined;
  }
  return textOnlyTurn(ctx, turn.text.trim());
}

/** A turn without tool calls: the final answer, or a nudge (and `stuck` / `failed` once nudges run out). */
async function textOnlyTurn(ctx: RunContext, text: string): Promise<Ending | undefined> {
  const { state, limits } = ctx;
  const required = ctx.request.require_successful_tools ?? [];
  const requiredMet =
    required.length === 0 || state.succeeded.some((n) => matchesAnyToolPattern(n, required));
  if (text !== '' && requiredMet) return ctx.daemon ? ctx.daemon.goIdle(ctx) : finalAnswer(ctx, text);
  state.nudges++;
  if (state.nudges > limits.max_nudges) {
    if (text !== '' && !requiredMet)
      return {
        status: 'failed',
        reason: `require_successful_tools: none of ${required.join(', ')} succeeded`,
      };
    return {
      status: 'stuck',
      reason: `${state.nudges} consecutive turns without a tool call or an answer (max_nudges ${limits.max_nudges})`,
    };
  }
  const nudge =
    text !== '' && !requiredMet
      ? `${ctx.env.nudge} The task requires a successful call of one of: ${required.join(', ')}.`
      : ctx.env.nudge;
  state.messages.push({ role: 'user', content: nudge });
  markInputChecked(ctx);
  ctx.sink.emit(notice('nudge', nudge, { nudges: state.nudges }));
  await ctx.checkpoint();
  return undefined;
}

/**
 * The final answer; with output_schema it must parse and validate: a failing answer gets one repair turn naming the
 * problems, a second failure ends the run `failed` with `invalid_output`.
 */
async function finalAnswer(ctx: RunContext, text: string): Promise<Ending | undefined> {
  const { state } = ctx;
  const schema = ctx.request.output_schema;
  const done: Ending = { status: 'done', reason: 'the model gave a final answer' };
  if (schema === undefined) return done;
  const check = checkOutput(text, schema);
  if (check.ok) {
    state.output = check.value;
    return done;
  }
  if (state.output_repaired === true) throw invalidOutputError(check.problems);
  state.output_repaired = true;
  const message = repairMessage(check.problems);
  state.messages.push({ role: 'user', content: message });
  markInputChecked(ctx);
  ctx.sink.emit(notice('output_repair', message, { problems: check.problems }));
  await ctx.checkpoint();
  return undefined;
}

function budgetCheck(ctx: RunContext): string | undefined {
  const { state, limits } = ctx;
  if (state.iteration >= limits.max_iterations) return `max_iterations (${limits.max_iterations}) reached`;
  const tokens = state.usage.input_tokens + state.usage.output_tokens;
  if (limits.max_tokens !== undefined && tokens >= limits.max_tokens)
    return `max_tokens (${limits.max_tokens}) reached: ${tokens} tokens used`;
  if (limits.max_cost_usd === undefined) return undefined;
  if (state.usage.cost_usd === undefined) {
    if (!ctx.costWarned) {
      ctx.costWarned = true;
      const { kind, model } = ctx.env.provider;
      ctx.sink.emit(
        notice(
          'cost_unknown',
          `no price is configured for ${kind} model ${model}: max_cost_usd cannot be enforced`,
        ),
      );
    }
    return undefined;
  }
  if (state.usage.cost_usd >= limits.max_cost_usd)
    return `max_cost_usd (${limits.max_cost_usd}) reached: $${state.usage.cost_usd.toFixed(6)} spent`;
  return undefined;
}

function finish(ctx: RunContext, ending: Ending): CompletedEvent {
  const { state } = ctx;
  ctx.env.tools?.runEnded(ctx);
  state.phase = 'finished';
  state.status = ending.status;
  state.reason = ending.reason;
  const event = ctx.sink.emit(runCompleted(ending.status, ending.reason, state));
  state.seq = event.seq;
  return event;
}
