import OpenAI from 'openai';
import type {
  ChatCompletionChunk,
  ChatCompletionCreateParamsBase,
  ChatCompletionMessageParam,
  ChatCompletionTool,
} from 'openai/resources/chat/completions';
import { toProviderAlias, type ProviderKind } from '@agentmesh/protocol';
import { providerError, providerSchema } from './errors.js';
import type { ChatMessage, ChatToolCall, ModelProvider, ModelRequest, ModelTurn } from './types.js';

export interface OpenAiProviderOptions {
  kind?: Extract<ProviderKind, 'openai' | 'openai-compatible'>;
  model: string;
  apiKey?: string | undefined;
  baseUrl?: string | undefined;
  /** Stream the response and accumulate deltas (default true). */
  stream?: boolean;
  maxRetries?: number;
  maxOutputTokens?: number;
  /** A client to reuse across runs (the planner shares one per endpoint). */
  client?: OpenAI;
}

/** Builds the OpenAI SDK client for an endpoint. */
export function createOpenAiClient(options: {
  apiKey?: string | undefined;
  baseUrl?: string | undefined;
  maxRetries?: number;
}): OpenAI {
  return new OpenAI({
    apiKey: options.apiKey ?? 'not-needed',
    ...(options.baseUrl === undefined ? {} : { baseURL: options.baseUrl }),
    maxRetries: options.maxRetries ?? 2,
  });
}

/** OpenAI Chat Completions, and any server that speaks it (Ollama, vLLM, OpenRouter). */
export class OpenAiProvider implements ModelProvider {
  readonly kind: Extract<ProviderKind, 'openai' | 'openai-compatible'>;
  readonly model: string;
  private readonly client: OpenAI;
  private readonly stream: boolean;
  private readonly maxOutputTokens: number | undefined;

  constructor(options: OpenAiProviderOptions) {
    this.kind = options.kind ?? 'openai';
    this.model = options.model;
    this.client = options.client ?? createOpenAiClient(options);
    this.stream = options.stream ?? true;
    this.maxOutputTokens = options.maxOutputTokens;
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
      ...(tools.length > 0 ? { tools, parallel_tool_calls: request.parallelCalls } : {}),
      ...(this.maxOutputTokens === undefined ? {} : { max_completion_tokens: this.maxOutputTokens }),
    };
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
        return {
          text: choice?.message.content ?? '',
          tool_calls: calls,
          usage: {
            input_tokens: res.usage?.prompt_tokens ?? 0,
            output_tokens: res.usage?.completion_tokens ?? 0,
          },
          ...(choice?.finish_reason ? { stop_reason: choice.finish_reason } : {}),
        };
      }
      const stream = await this.client.chat.completions.create(
        { ...body, stream: true, stream_options: { include_usage: true } },
        { signal: request.signal },
      );
      return await accumulateStream(stream);
    } catch (error) {
      throw providerError(this.kind, error, request.signal);
    }
  }
}

async function accumulateStream(stream: AsyncIterable<ChatCompletionChunk>): Promise<ModelTurn> {
  let text = '';
  let stopReason: string | undefined;
  const usage = { input_tokens: 0, output_tokens: 0 };
  const calls = new Map<number, ChatToolCall>();
  for await (const chunk of stream) {
    if (chunk.usage) {
      usage.input_tokens = chunk.usage.prompt_tokens;
      usage.output_tokens = chunk.usage.completion_tokens;
    }
    const choice = chunk.choices[0];
    if (choice === undefined) continue;
    if (choice.delta.content) text += choice.delta.content;
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
