import { fromProviderAlias } from '@agentmesh/protocol';
import type { ChatMessage, ChatToolCall, ModelDelta, ModelTurn, TokenUsage } from '../providers/types.js';
import type { RunSnapshot } from '../model/snapshot.js';
import type { RunContext } from './context.js';
import { notice } from './events.js';
import { TurnGuard, judged, redactNative, trip, type PendingJudgement } from './guard.js';

/** Maps a provider alias (`fs__read_file`) back to the canonical name; meta-tools and canonical names pass as is. */
export function canonicalName(name: string): string {
  return name.includes('__') ? fromProviderAlias(name) : name;
}

/** Arguments for events: the parsed object when the JSON is valid, the raw text otherwise. */
function parseArgs(raw: string): unknown {
  if (raw.trim() === '') return {};
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    return raw;
  }
}

/** Gives every call of a turn an id, unique within the turn (providers may send none or repeat one). */
function withCallIds(calls: readonly ChatToolCall[], iteration: number): ChatToolCall[] {
  const seen = new Set<string>();
  return calls.map((c, i) => {
    let id = c.id;
    if (id === '' || seen.has(id)) id = `call_${iteration}_${i + 1}`;
    seen.add(id);
    return { ...c, id };
  });
}

/**
 * One model turn: offers this turn's tools, asks the model, adds up usage and cost, reports the response (and any
 * native searches) and appends the assistant message to the transcript. Under guardrails the streamed deltas and the
 * turn's text pass the output rules first, and `pending` input judges decide beside the turn (see {@link askModel}).
 */
export async function modelTurn(ctx: RunContext, pending?: PendingJudgement): Promise<ModelTurn> {
  const { state, env, sink, exposure } = ctx;
  state.iteration++;
  const turnTools = exposure.beginTurn();
  if (turnTools.evicted.length > 0)
    sink.emit(
      notice(
        'tools_evicted',
        `promoted tools evicted to stay within the tool budget: ${turnTools.evicted.join(', ')}`,
        { evicted: turnTools.evicted },
      ),
    );
  sink.emit({ type: 'llm.request', iteration: state.iteration, tools: turnTools.offered });
  const native =
    state.search.mode === 'native' && state.search.native_variant !== undefined && exposure.hasDeferred;
  const turn = await askModel(ctx, pending, (signal, onDelta) =>
    env.provider.complete({
      model: env.provider.model,
      system: ctx.skills ? ctx.skills.systemPrompt(state.system) : state.system,
      messages: state.messages,
      tools: turnTools.tools,
      parallelCalls: env.capabilities.parallel_calls,
      ...(native ? { nativeSearch: state.search.native_variant! } : {}),
      ...(ctx.request.output_schema === undefined ? {} : { outputSchema: ctx.request.output_schema }),
      signal,
      turn: state.iteration - 1,
      onDelta,
    }),
  );
  const usage = turn.usage;
  const cost = countUsage(ctx, usage);
  const calls = withCallIds(turn.tool_calls, state.iteration);
  turn.tool_calls = calls;
  if (turn.text.trim() !== '') state.last_text = turn.text;
  sink.emit({
    type: 'llm.response',
    iteration: state.iteration,
    text: turn.text,
    tool_calls: calls.map((c) => ({
      id: c.id,
      name: canonicalName(c.name),
      arguments: parseArgs(c.arguments),
    })),
    usage: { ...usage, ...(cost === undefined ? {} : { cost_usd: cost }) },
  });
  await env.quota?.record({ tokens: usage.input_tokens + usage.output_tokens, cost_usd: cost });
  for (const search of turn.native_searches ?? []) {
    const results = search.results.map(canonicalName);
    exposure.surface(results);
    sink.emit({ type: 'tool.search', query: search.query, strategy: search.variant, results, native: true });
  }
  const message: ChatMessage = {
    role: 'assistant',
    content: turn.text,
    ...(calls.length > 0 ? { tool_calls: calls } : {}),
    ...(turn.native ? { native: turn.native } : {}),
  };
  state.messages.push(message);
  return turn;
}

/** Adds a turn's tokens (and their cost, when the model has a price) to the run's usage; the turn's cost. */
function countUsage(ctx: RunContext, usage: ModelTurn['usage']): number | undefined {
  const { state, env } = ctx;
  state.usage.input_tokens += usage.input_tokens;
  state.usage.output_tokens += usage.output_tokens;
  addUsageDetails(state.usage, usage);
  const cost = env.prices.cost(env.price, usage);
  if (cost !== undefined) state.usage.cost_usd = (state.usage.cost_usd ?? 0) + cost;
  return cost;
}

type Ask = (signal: AbortSignal, onDelta: (d: ModelDelta) => void) => Promise<ModelTurn>;

/**
 * Asks the model, publishing its deltas as `llm.delta`. With guardrails: deltas go through the output rules, a block
 * match cancels the turn and ends the run, and nothing of the turn is published before the judges beside it pass
 * (a tripping judge cancels the turn). The returned turn's text is redacted.
 */
async function askModel(ctx: RunContext, pending: PendingJudgement, ask: Ask): Promise<ModelTurn> {
  const iteration = ctx.state.iteration;
  const publish = (kind: ModelDelta['kind'], text: string) =>
    ctx.sink.emit({ type: 'llm.delta', iteration, kind, text });
  const guard = ctx.env.guardrails;
  if (guard === undefined || guard.set.empty) return ask(ctx.signal, (d) => publish(d.kind, d.text));
  const cancel = new AbortController();
  const signal = AbortSignal.any([ctx.signal, cancel.signal]);
  const turnGuard = new TurnGuard(ctx, guard, publish, () => cancel.abort(), pending !== undefined);
  const verdict = pending?.verdict.catch((error: unknown) => {
    cancel.abort();
    throw error;
  });
  // both settle: a tripping judge cancels the turn at once, a failing turn still waits for its judges' verdict
  const [asked] = await Promise.all([
    ask(signal, (d) => turnGuard.delta(d.kind, d.text)).then(
      (value) => ({ ok: true as const, value }),
      (error: unknown) => ({ ok: false as const, error }),
    ),
    verdict && judged(ctx, verdict),
  ]);
  if (turnGuard.blockedBy !== undefined) throw trip(ctx, turnGuard.blockedBy, 'output');
  if (!asked.ok) throw asked.error;
  const turn = asked.value;
  turn.text = turnGuard.end(turn.text);
  if (turn.native) turn.native = redactNative(turn.native, guard.set.output);
  if (turnGuard.blockedBy !== undefined) throw trip(ctx, turnGuard.blockedBy, 'output');
  await turnGuard.judgeOutput(turn.text);
  turnGuard.release();
  return turn;
}

/** Adds the cache and reasoning token counts of one response to the run's usage. */
function addUsageDetails(total: RunSnapshot['usage'], turn: TokenUsage): void {
  for (const key of ['cache_read_tokens', 'cache_write_tokens', 'reasoning_tokens'] as const) {
    const n = turn[key];
    if (n) total[key] = (total[key] ?? 0) + n;
  }
}
