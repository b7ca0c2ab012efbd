import { createRequire } from 'node:module';
import type OpenAI from 'openai';
import type {
  ChatCompletionChunk,
  ChatCompletionCreateParamsBase,
  ChatCompletionMessageParam,
  ChatCompletionTool,
} from 'openai/resources/chat/completions';
import { toProviderAlias, type ProviderKind } from '@agentmesh/protocol';
import { allowsStrictMode } from '../output-schema.js';
import { contentFilteredError, providerError, providerSchema } from './errors.js';
import { promptCacheKey, usageOf, type ModelTuning } from './tuning.js';
import type {
  ChatMessage,
  ChatToolCall,
  ModelDelta,
  ModelProvider,
  ModelRequest,
  ModelTurn,
} from './types.js';

export interface OpenAiProviderOptions extends ModelTuning {
  /** `openai`, `openai-compatible` or a preset name (all speak Chat Completions). */
  kind?: ProviderKind;
  model: string;
  apiKey?: string | undefined;
  baseUrl?: string | undefined;
  /** Stream the response and accumulate deltas (default true). */
  stream?: boolean;
  maxRetries?: number;
  /** Ask for usage in the stream (`stream_options.include_usage`; default true, some servers reject it). */
  streamUsage?: boolean;
  /** A client to reuse across runs (the planner shares one per endpoint). */
  client?: OpenAI;
}

const requireSdk = createRequire(import.meta.url);

/** Builds the OpenAI SDK client for an endpoint; the SDK loads with the first client, not with the planner. */
export function createOpenAiClient(options: {
  apiKey?: string | undefined;
  baseUrl?: string | undefined;
  maxRetries?: number;
}): OpenAI {
  const { OpenAI: Sdk } = requireSdk('openai') as typeof import('openai');
  return new Sdk({
    apiKey: options.apiKey ?? 'not-needed',
    ...(options.baseUrl === undefined ? {} : { baseURL: options.baseUrl }),
    maxRetries: options.maxRetries ?? 2,
  });
}

/** OpenAI Chat Completions, and any server that speaks it (Ollama, vLLM, OpenRouter). */
export class OpenAiProvider implements ModelProvider {
  readonly kind: ProviderKind;
  readonly model: string;
  private readonly client: OpenAI;
  private readonly stream: boolean;
  private readonly maxOutputTokens: number | undefined;

  constructor(private readonly options: OpenAiProviderOptions) {
    this.kind = options.kind ?? 'openai';
    this.model = options.model;
    this.client = options.client ?? createOpenAiClient(options);
    this.stream = options.stream ?? true;
    this.maxOutputTokens = options.maxOutputTokens;
  }

  private tuning(request: ModelRequest): Partial<ChatCompletionCreateParamsBase> {
    const o = this.options;
    return {
      ...(o.temperature === undefined ? {} : { temperature: o.temperature }),
      ...(o.reasoningEffort === undefined ? {} : { reasoning_effort: o.reasoningEffort }),
      ...(this.kind === 'openai' && o.promptCaching !== false
        ? { prompt_cache_key: promptCacheKey(request) }
        : {}),
    };
  }

  async complete(request: ModelRequest): Promise<ModelTurn> {
    const tools: ChatCompletionTool[] = request.tools.map((t) => ({
      type: 'function',
      function: {
        name: toProviderAlias(t.name),
        description: t.description,
        parameters: providerSchema(t.input_schema),
      },
    }));
    const body: ChatCompletionCreateParamsBase = {
      model: request.model,
      messages: toOpenAiMessages(request.system, request.messages),
      ...(tools.length > 0
        ? { tools, parallel_tool_calls: this.options.parallelCalls ?? request.parallelCalls }
        : {}),
      ...(this.maxOutputTokens === undefined ? {} : { max_completion_tokens: this.maxOutputTokens }),
      ...this.tuning(request),
      ...(request.outputSchema === undefined
        ? {}
        : { response_format: { type: 'json_schema', json_schema: jsonSchemaFormat(request.outputSchema) } }),
    };
    let turn: ModelTurn;
    try {
      if (!this.stream) {
        const res = await this.client.chat.completions.create(
          { ...body, stream: false },
          { signal: request.signal },
        );
        const choice = res.choices[0];
        const calls: ChatToolCall[] = [];
        for (const c of choice?.message.tool_calls ?? [])
          if (c.type === 'function')
            calls.push({ id: c.id, name: c.function.name, arguments: c.function.arguments });
        turn = {
          text: choice?.message.content ?? '',
          tool_calls: calls,
          usage: chatUsage(res.usage),
          ...(choice?.finish_reason ? { stop_reason: choice.finish_reason } : {}),
        };
      } else {
        const stream = await this.client.chat.completions.create(
          {
            ...body,
            stream: true,
            ...(this.options.streamUsage === false ? {} : { stream_options: { include_usage: true } }),
          },
          { signal: request.signal },
        );
        turn = await accumulateStream(stream, request.onDelta);
      }
    } catch (error) {
      throw providerError(this.kind, error, request.signal);
    }
    if (turn.stop_reason === 'content_filter') throw contentFilteredError(this.kind, 'content_filter');
    return turn;
  }
}

function chatUsage(u: OpenAI.CompletionUsage | null | undefined): ModelTurn['usage'] {
  return usageOf(u?.prompt_tokens ?? 0, u?.completion_tokens ?? 0, {
    cacheRead: u?.prompt_tokens_details?.cached_tokens ?? null,
    reasoning: u?.completion_tokens_details?.reasoning_tokens ?? null,
  });
}

async function accumulateStream(
  stream: AsyncIterable<ChatCompletionChunk>,
  onDelta: ((delta: ModelDelta) => void) | undefined,
): Promise<ModelTurn> {
  let text = '';
  let stopReason: string | undefined;
  let usage = usageOf(0, 0);
  const calls = new Map<number, ChatToolCall>();
  for await (const chunk of stream) {
    if (chunk.usage) usage = chatUsage(chunk.usage);
    const choice = chunk.choices[0];
    if (choice === undefined) continue;
    // DeepSeek, vLLM and OpenRouter stream thinking as reasoning_content / reasoning
    const extra = choice.delta as { reasoning_content?: string | null; reasoning?: string | null };
    const reasoning = extra.reasoning_content ?? extra.reasoning;
    if (reasoning) onDelta?.({ kind: 'reasoning', text: reasoning });
    if (choice.delta.content) {
      text += choice.delta.content;
      onDelta?.({ kind: 'text', text: choice.delta.content });
    }
    for (const d of choice.delta.tool_calls ?? []) {
      let call = calls.get(d.index);
      if (call === undefined) calls.set(d.index, (call = { id: '', name: '', arguments: '' }));
      if (d.id) call.id = d.id;
      if (d.function?.name) call.name += d.function.name;
      if (d.function?.arguments) call.arguments += d.function.arguments;
    }
    if (choice.finish_reason) stopReason = choice.finish_reason;
  }
  return {
    text,
    tool_calls: [...calls.entries()].sort((a, b) => a[0] - b[0]).map(([, c]) => c),
    usage,
    ...(stopReason === undefined ? {} : { stop_reason: stopReason }),
  };
}

function toOpenAiMessages(system: string, messages: readonly ChatMessage[]): ChatCompletionMessageParam[] {
  const out: ChatCompletionMessageParam[] = [];
  if (system !== '') out.push({ role: 'system', content: system });
  for (const m of messages) {
    if (m.role === 'user') out.push({ role: 'user', content: m.content });
    else if (m.role === 'tool') out.push({ role: 'tool', tool_call_id: m.call_id, content: m.content });
    else
      out.push({
        role: 'assistant',
        content: m.content === '' ? null : m.content,
        ...(m.tool_calls && m.tool_calls.length > 0
          ? {
              tool_calls: m.tool_calls.map((c) => ({
                id: c.id,
                type: 'function' as const,
                function: { name: c.name, arguments: c.arguments },
              })),
            }
          : {}),
      });
  }
  return out;
}

/** The `json_schema` response format of an output schema: strict when OpenAI's strict mode accepts the schema. */
export function jsonSchemaFormat(schema: Record<string, unknown>): {
  name: string;
  schema: Record<string, unknown>;
  strict: boolean;
} {
  return { name: 'final_answer', schema, strict: allowsStrictMode(schema) };
}
