import { createRequire } from 'node:module';
import type Anthropic from '@anthropic-ai/sdk';
import type {
  MessageCreateParamsBase,
  MessageParam,
  RawMessageStreamEvent,
} from '@anthropic-ai/sdk/resources/messages';
import { fromProviderAlias, toProviderAlias } from '@agentmesh/protocol';
import { contentFilteredError, providerError, providerSchema } from './errors.js';
import { usageOf, type ModelTuning } from './tuning.js';
import type {
  ChatMessage,
  ModelDelta,
  ChatToolCall,
  ModelProvider,
  ModelRequest,
  ModelTurn,
  NativeSearchRecord,
} from './types.js';
import { FINAL_ANSWER_TOOL } from './types.js';

export interface AnthropicProviderOptions extends ModelTuning {
  model: string;
  apiKey?: string | undefined;
  baseUrl?: string | undefined;
  stream?: boolean;
  maxRetries?: number;
  /** `max_tokens` of each response (default 4096; raised above the thinking budget when thinking is on). */
  maxOutputTokens?: number;
  client?: Anthropic;
}

const EPHEMERAL = { type: 'ephemeral' } as const;

const requireSdk = createRequire(import.meta.url);

/** Builds the Anthropic SDK client for an endpoint; the SDK loads with the first client, not with the planner. */
export function createAnthropicClient(options: {
  apiKey?: string | undefined;
  baseUrl?: string | undefined;
  maxRetries?: number;
}): Anthropic {
  const { Anthropic: Sdk } = requireSdk('@anthropic-ai/sdk') as typeof import('@anthropic-ai/sdk');
  return new Sdk({
    apiKey: options.apiKey ?? null,
    ...(options.baseUrl === undefined ? {} : { baseURL: options.baseUrl }),
    maxRetries: options.maxRetries ?? 2,
  });
}

/** The server tool Anthropic runs over `defer_loading` tools. */
export const NATIVE_SEARCH_TOOLS: Record<'bm25' | 'regex', { type: string; name: string }> = {
  bm25: { type: 'tool_search_tool_bm25_20251119', name: 'tool_search_tool_bm25' },
  regex: { type: 'tool_search_tool_regex_20251119', name: 'tool_search_tool_regex' },
};

type Block = Record<string, unknown> & { type: string };

/** Anthropic Messages, with native tool search (`defer_loading` + tool_search_tool_*) when asked. */
export class AnthropicProvider implements ModelProvider {
  readonly kind = 'anthropic' as const;
  readonly model: string;
  private readonly client: Anthropic;
  private readonly stream: boolean;
  private readonly maxOutputTokens: number;

  constructor(private readonly options: AnthropicProviderOptions) {
    this.model = options.model;
    this.client = options.client ?? createAnthropicClient(options);
    this.stream = options.stream ?? true;
    this.maxOutputTokens = options.maxOutputTokens ?? 4096;
  }

  /**
   * The request body. With prompt caching on (the default), cache breakpoints sit on the system prompt, the last
   * tool and the last block of the transcript, so each turn reads the previous turn's prefix from the cache.
   */
  private body(request: ModelRequest): MessageCreateParamsBase {
    const o = this.options;
    const caching = o.promptCaching !== false;
    const tools: Record<string, unknown>[] = request.tools.map((t) => ({
      name: toProviderAlias(t.name),
      description: t.description,
      input_schema: providerSchema(t.input_schema),
      ...(t.defer_loading ? { defer_loading: true } : {}),
    }));
    const structured = request.outputSchema === undefined ? undefined : finalAnswerTool(request.outputSchema);
    if (structured) tools.push(structured);
    const lastCacheable = [...tools].reverse().find((t) => t['defer_loading'] !== true);
    if (caching && lastCacheable) lastCacheable['cache_control'] = EPHEMERAL;
    if (request.nativeSearch === 'bm25' || request.nativeSearch === 'regex')
      tools.push({ ...NATIVE_SEARCH_TOOLS[request.nativeSearch] });
    const messages = toAnthropicMessages(request.messages);
    if (caching) markTranscriptPrefix(messages);
    const thinking = o.thinkingBudget;
    const parallel = o.parallelCalls ?? request.parallelCalls;
    return {
      model: request.model,
      max_tokens:
        thinking === undefined ? this.maxOutputTokens : Math.max(this.maxOutputTokens, thinking + 1024),
      ...(request.system === ''
        ? {}
        : {
            system: caching
              ? [{ type: 'text', text: request.system, cache_control: EPHEMERAL }]
              : request.system,
          }),
      messages,
      ...(tools.length > 0 ? { tools } : {}),
      ...(structured
        ? { tool_choice: finalAnswerChoice(tools.length > 1, parallel) }
        : tools.length > 0 && !parallel
          ? { tool_choice: { type: 'auto', disable_parallel_tool_use: true } }
          : {}),
      ...(thinking === undefined ? {} : { thinking: { type: 'enabled', budget_tokens: thinking } }),
      ...(o.temperature === undefined || thinking !== undefined ? {} : { temperature: o.temperature }),
    } as unknown as MessageCreateParamsBase;
  }

  async complete(request: ModelRequest): Promise<ModelTurn> {
    const body = this.body(request);
    let turn: ModelTurn;
    try {
      if (!this.stream) {
        const res = await this.client.messages.create({ ...body, stream: false }, { signal: request.signal });
        turn = fromBlocks(
          res.content as unknown as Block[],
          anthropicUsage(res.usage),
          res.stop_reason ?? undefined,
        );
      } else {
        const stream = await this.client.messages.create(
          { ...body, stream: true },
          { signal: request.signal },
        );
        turn = await accumulateStream(stream, request.onDelta);
      }
    } catch (error) {
      throw providerError('anthropic', error, request.signal);
    }
    if (turn.stop_reason === 'refusal') throw contentFilteredError('anthropic', 'refusal');
    return request.outputSchema === undefined ? turn : takeFinalAnswer(turn, request.outputSchema);
  }
}

interface AnthropicWireUsage {
  input_tokens?: number | null;
  output_tokens?: number | null;
  cache_read_input_tokens?: number | null;
  cache_creation_input_tokens?: number | null;
}

/** Anthropic counts cached input apart from `input_tokens`; agentmesh's input_tokens includes it. */
function anthropicUsage(u: AnthropicWireUsage): ModelTurn['usage'] {
  const read = u.cache_read_input_tokens ?? 0;
  const write = u.cache_creation_input_tokens ?? 0;
  return usageOf((u.input_tokens ?? 0) + read + write, u.output_tokens ?? 0, {
    cacheRead: read,
    cacheWrite: write,
  });
}

/** Puts a cache breakpoint on the last block of the transcript (the prefix the next turn repeats). */
function markTranscriptPrefix(messages: MessageParam[]): void {
  const last = messages[messages.length - 1];
  if (last === undefined || !Array.isArray(last.content)) return;
  const block = last.content[last.content.length - 1] as Block | undefined;
  if (block !== undefined && (block.type === 'text' || block.type === 'tool_result'))
    block['cache_control'] = EPHEMERAL;
}

async function accumulateStream(
  stream: AsyncIterable<RawMessageStreamEvent>,
  onDelta: ((delta: ModelDelta) => void) | undefined,
): Promise<ModelTurn> {
  const blocks: Block[] = [];
  const partialJson = new Map<number, string>();
  let wire: AnthropicWireUsage = {};
  let stopReason: string | undefined;
  for await (const event of stream) {
    switch (event.type) {
      case 'message_start':
        wire = { ...(event.message.usage as AnthropicWireUsage) };
        break;
      case 'content_block_start': {
        const block = { ...(event.content_block as unknown as Block) };
        blocks[event.index] = block;
        if (block.type === 'tool_use' || block.type === 'server_tool_use') partialJson.set(event.index, '');
        break;
      }
      case 'content_block_delta': {
        const block = blocks[event.index];
        if (block !== undefined) addDelta(block, event, partialJson, onDelta);
        break;
      }
      case 'content_block_stop': {
        const block = blocks[event.index];
        const json = partialJson.get(event.index);
        if (block !== undefined && json !== undefined) finishToolInput(block, json);
        break;
      }
      case 'message_delta':
        for (const [k, v] of Object.entries(event.usage))
          if (v != null) wire[k as keyof AnthropicWireUsage] = v;
        if (event.delta.stop_reason) stopReason = event.delta.stop_reason;
        break;
      default:
        break;
    }
  }
  return fromBlocks(
    blocks.filter((b) => b !== undefined),
    anthropicUsage(wire),
    stopReason,
  );
}

/** One streamed delta into its content block: text and thinking also go to `onDelta`; tool input JSON is collected. */
function addDelta(
  block: Block,
  event: Extract<RawMessageStreamEvent, { type: 'content_block_delta' }>,
  partialJson: Map<number, string>,
  onDelta: ((delta: ModelDelta) => void) | undefined,
): void {
  const delta = event.delta;
  if (delta.type === 'text_delta') {
    block['text'] = String(block['text'] ?? '') + delta.text;
    onDelta?.({ kind: 'text', text: delta.text });
  } else if (delta.type === 'thinking_delta') {
    block['thinking'] = String(block['thinking'] ?? '') + delta.thinking;
    onDelta?.({ kind: 'reasoning', text: delta.thinking });
  } else if (delta.type === 'signature_delta')
    block['signature'] = String(block['signature'] ?? '') + delta.signature;
  else if (delta.type === 'input_json_delta')
    partialJson.set(event.index, (partialJson.get(event.index) ?? '') + delta.partial_json);
}

/** A tool block's input, parsed from its streamed JSON (kept raw too); input that does not parse becomes `{}`. */
function finishToolInput(block: Block, json: string): void {
  block['_raw_input'] = json;
  try {
    block['input'] = json === '' ? {} : (JSON.parse(json) as unknown);
  } catch {
    block['input'] = {};
  }
}

function fromBlocks(
  rawBlocks: Block[],
  usage: ModelTurn['usage'],
  stopReason: string | undefined,
): ModelTurn {
  let text = '';
  const calls: ChatToolCall[] = [];
  const searches = new Map<string, NativeSearchRecord>();
  const blocks: Block[] = [];
  let hasServerBlocks = false;
  for (const raw of rawBlocks) {
    const { _raw_input: rawInput, ...block } = raw;
    blocks.push(block as Block);
    if (block.type === 'text') text += String(block['text'] ?? '');
    else if (block.type === 'tool_use')
      calls.push({
        id: String(block['id']),
        name: String(block['name']),
        arguments: typeof rawInput === 'string' ? rawInput || '{}' : JSON.stringify(block['input'] ?? {}),
      });
    else if (block.type === 'server_tool_use') {
      hasServerBlocks = true;
      const name = String(block['name']);
      if (name.startsWith('tool_search_tool_')) {
        const input = (block['input'] ?? {}) as Record<string, unknown>;
        searches.set(String(block['id']), {
          query: String(input['query'] ?? input['pattern'] ?? ''),
          variant: name.endsWith('regex') ? 'regex' : 'bm25',
          results: [],
        });
      }
    } else if (block.type === 'tool_search_tool_result') {
      hasServerBlocks = true;
      const record = searches.get(String(block['tool_use_id']));
      const content = block['content'] as
        { type?: string; tool_references?: { tool_name: string }[] } | undefined;
      if (record && content?.type === 'tool_search_tool_search_result')
        record.results.push(...(content.tool_references ?? []).map((r) => fromProviderAlias(r.tool_name)));
    } else hasServerBlocks = true;
  }
  return {
    text,
    tool_calls: calls,
    usage,
    ...(stopReason === undefined ? {} : { stop_reason: stopReason }),
    ...(searches.size > 0 ? { native_searches: [...searches.values()] } : {}),
    ...(hasServerBlocks ? { native: { provider: 'anthropic' as const, blocks } } : {}),
  };
}

function parseInput(args: string): unknown {
  try {
    const value = JSON.parse(args) as unknown;
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? value : {};
  } catch {
    return {};
  }
}

function toAnthropicMessages(messages: readonly ChatMessage[]): MessageParam[] {
  const out: { role: 'user' | 'assistant'; content: Block[] }[] = [];
  const push = (role: 'user' | 'assistant', block: Block) => {
    const last = out[out.length - 1];
    if (last !== undefined && last.role === role) last.content.push(block);
    else out.push({ role, content: [block] });
  };
  for (const m of messages) {
    if (m.role === 'user') push('user', { type: 'text', text: m.content });
    else if (m.role === 'tool')
      push('user', {
        type: 'tool_result',
        tool_use_id: m.call_id,
        content: m.content,
        ...(m.is_error ? { is_error: true } : {}),
      });
    else if (m.native?.provider === 'anthropic')
      for (const b of m.native.blocks) push('assistant', b as Block);
    else {
      if (m.content !== '') push('assistant', { type: 'text', text: m.content });
      for (const c of m.tool_calls ?? [])
        push('assistant', { type: 'tool_use', id: c.id, name: c.name, input: parseInput(c.arguments) });
      if (m.content === '' && (m.tool_calls ?? []).length === 0)
        push('assistant', { type: 'text', text: '(no answer)' });
    }
  }
  return out as unknown as MessageParam[];
}

/** Anthropic tool inputs are objects: any other schema travels wrapped as `{value}`. */
function wrapsValue(schema: Record<string, unknown>): boolean {
  return schema['type'] !== 'object';
}

/** The forced tool whose input is the structured answer (Anthropic has no response format). */
function finalAnswerTool(schema: Record<string, unknown>): Record<string, unknown> {
  return {
    name: FINAL_ANSWER_TOOL,
    description:
      'Gives your final answer. Call it exactly once, when the task is done; its input is the answer.',
    input_schema: wrapsValue(schema)
      ? { type: 'object', properties: { value: schema }, required: ['value'] }
      : schema,
  };
}

/** With other tools the model must call some tool (the final answer among them); without, the answer tool. */
function finalAnswerChoice(otherTools: boolean, parallel: boolean): Record<string, unknown> {
  const choice = otherTools ? { type: 'any' } : { type: 'tool', name: FINAL_ANSWER_TOOL };
  return parallel ? choice : { ...choice, disable_parallel_tool_use: true };
}

/** A call of the answer tool becomes the turn's final text (its JSON input); the turn's other calls are dropped. */
function takeFinalAnswer(turn: ModelTurn, schema: Record<string, unknown>): ModelTurn {
  const answer = turn.tool_calls.find((c) => c.name === FINAL_ANSWER_TOOL);
  if (answer === undefined) return turn;
  let text = answer.arguments;
  if (wrapsValue(schema))
    try {
      text = JSON.stringify((JSON.parse(answer.arguments) as { value?: unknown }).value ?? null);
    } catch {
      // left as is: the loop names the parse problem in its repair turn
    }
  return { ...turn, text, tool_calls: [] };
}
