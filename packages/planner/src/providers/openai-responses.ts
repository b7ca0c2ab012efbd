import type OpenAI from 'openai';
import type {
  Response,
  ResponseCreateParamsBase,
  ResponseInputItem,
  ResponseStreamEvent,
  ResponseUsage,
} from 'openai/resources/responses/responses';
import { fromProviderAlias, toProviderAlias } from '@agentmesh/protocol';
import { createOpenAiClient, jsonSchemaFormat } from './openai.js';
import { contentFilteredError, providerError, providerSchema } from './errors.js';
import { promptCacheKey, usageOf, type ModelTuning } from './tuning.js';
import type {
  ChatMessage,
  ChatToolCall,
  ModelDelta,
  ModelProvider,
  ModelRequest,
  ModelTurn,
  NativeSearchRecord,
} from './types.js';

export interface OpenAiResponsesProviderOptions extends ModelTuning {
  model: string;
  apiKey?: string | undefined;
  baseUrl?: string | undefined;
  stream?: boolean;
  maxRetries?: number;
  client?: OpenAI;
}

type Item = Record<string, unknown> & { type: string };

/**
 * OpenAI Responses API (`POST /responses`), stateless: the planner keeps the transcript, `store` is false, and the
 * output items of each turn (reasoning with its encrypted content, function calls, messages) go back verbatim on
 * the next one, so `previous_response_id` is never needed.
 */
export class OpenAiResponsesProvider implements ModelProvider {
  readonly kind = 'openai-responses' as const;
  readonly model: string;
  private readonly client: OpenAI;
  private readonly stream: boolean;

  constructor(private readonly options: OpenAiResponsesProviderOptions) {
    this.model = options.model;
    this.client = options.client ?? createOpenAiClient(options);
    this.stream = options.stream ?? true;
  }

  private body(request: ModelRequest): ResponseCreateParamsBase {
    const o = this.options;
    const hosted = request.nativeSearch === 'hosted';
    const tools: Record<string, unknown>[] = request.tools.map((t) => ({
      type: 'function' as const,
      name: toProviderAlias(t.name),
      description: t.description,
      parameters: providerSchema(t.input_schema),
      strict: false,
      ...(hosted && t.defer_loading ? { defer_loading: true } : {}),
    }));
    if (hosted) tools.push({ type: 'tool_search' });
    return {
      model: request.model,
      ...(request.system === '' ? {} : { instructions: request.system }),
      input: toResponsesInput(request.messages),
      store: false,
      ...(tools.length > 0
        ? {
            tools: tools as unknown as ResponseCreateParamsBase['tools'],
            parallel_tool_calls: o.parallelCalls ?? request.parallelCalls,
          }
        : {}),
      ...(o.maxOutputTokens === undefined ? {} : { max_output_tokens: o.maxOutputTokens }),
      ...(o.temperature === undefined ? {} : { temperature: o.temperature }),
      ...(o.reasoningEffort === undefined
        ? {}
        : {
            reasoning: { effort: o.reasoningEffort, summary: 'auto' as const },
            include: ['reasoning.encrypted_content' as const],
          }),
      ...(o.promptCaching === false ? {} : { prompt_cache_key: promptCacheKey(request) }),
      ...(request.outputSchema === undefined
        ? {}
        : { text: { format: { type: 'json_schema' as const, ...jsonSchemaFormat(request.outputSchema) } } }),
    };
  }

  async complete(request: ModelRequest): Promise<ModelTurn> {
    const body = this.body(request);
    let response: Response;
    try {
      if (!this.stream)
        response = await this.client.responses.create({ ...body, stream: false }, { signal: request.signal });
      else {
        const stream = await this.client.responses.create(
          { ...body, stream: true },
          { signal: request.signal },
        );
        response = await finalResponse(stream, request.onDelta);
      }
    } catch (error) {
      throw providerError(this.kind, error, request.signal);
    }
    if (response.incomplete_details?.reason === 'content_filter')
      throw contentFilteredError(this.kind, 'content_filter');
    return fromResponse(response);
  }
}

async function finalResponse(
  stream: AsyncIterable<ResponseStreamEvent>,
  onDelta: ((delta: ModelDelta) => void) | undefined,
): Promise<Response> {
  for await (const event of stream) {
    switch (event.type) {
      case 'response.output_text.delta':
        onDelta?.({ kind: 'text', text: event.delta });
        break;
      case 'response.reasoning_summary_text.delta':
      case 'response.reasoning_text.delta':
        onDelta?.({ kind: 'reasoning', text: event.delta });
        break;
      case 'response.completed':
      case 'response.incomplete':
        return event.response;
      case 'response.failed':
        throw Object.assign(new Error(event.response.error?.message ?? 'response failed'), {
          code: event.response.error?.code,
        });
      default:
        break;
    }
  }
  throw new Error('the response stream ended before response.completed');
}

function responsesUsage(u: ResponseUsage | undefined): ModelTurn['usage'] {
  return usageOf(u?.input_tokens ?? 0, u?.output_tokens ?? 0, {
    cacheRead: u?.input_tokens_details?.cached_tokens ?? null,
    reasoning: u?.output_tokens_details?.reasoning_tokens ?? null,
  });
}

function fromResponse(response: Response): ModelTurn {
  let text = '';
  const calls: ChatToolCall[] = [];
  const items = response.output as unknown as Item[];
  for (const item of items) {
    if (item.type === 'message')
      for (const part of (item['content'] ?? []) as { type: string; text?: string }[])
        if (part.type === 'output_text') text += part.text ?? '';
    if (item.type === 'function_call')
      calls.push({
        id: String(item['call_id']),
        name: String(item['name']),
        arguments: String(item['arguments'] ?? ''),
      });
  }
  const stop = response.incomplete_details?.reason ?? response.status ?? undefined;
  const searches = hostedSearches(items);
  return {
    text,
    tool_calls: calls,
    usage: responsesUsage(response.usage),
    ...(stop ? { stop_reason: stop } : {}),
    ...(searches.length > 0 ? { native_searches: searches } : {}),
    ...(items.some((i) => i.type === 'reasoning' || i.type.startsWith('tool_search'))
      ? { native: { provider: 'openai-responses' as const, blocks: items.map(withoutStatus) } }
      : {}),
  };
}

/** The hosted tool searches of a response: each tool_search_call with the functions its output loaded. */
function hostedSearches(items: Item[]): NativeSearchRecord[] {
  const records: (NativeSearchRecord & { callId: unknown; done: boolean })[] = [];
  for (const item of items) {
    if (item.type === 'tool_search_call') {
      const args = parseArguments(item['arguments']);
      const query = typeof args['query'] === 'string' ? args['query'] : JSON.stringify(args);
      records.push({ query, variant: 'hosted', results: [], callId: item['call_id'], done: false });
    } else if (item.type === 'tool_search_output') {
      const callId = item['call_id'];
      const record =
        records.find((r) => callId != null && r.callId === callId) ?? records.find((r) => !r.done);
      if (record === undefined) continue;
      record.done = true;
      for (const tool of (item['tools'] ?? []) as { type?: string; name?: string }[])
        if (tool.type === 'function' && typeof tool.name === 'string')
          record.results.push(fromProviderAlias(tool.name));
    }
  }
  return records.map(({ query, variant, results }) => ({ query, variant, results }));
}

function parseArguments(raw: unknown): Record<string, unknown> {
  let value = raw;
  if (typeof raw === 'string')
    try {
      value = JSON.parse(raw) as unknown;
    } catch {
      return { query: raw };
    }
  return value !== null && typeof value === 'object' ? (value as Record<string, unknown>) : {};
}

/** Output items go back as input without their server-side status. */
function withoutStatus(item: Item): Item {
  const { status: _status, ...rest } = item;
  return rest as Item;
}

function toResponsesInput(messages: readonly ChatMessage[]): ResponseInputItem[] {
  const out: Item[] = [];
  for (const m of messages) {
    if (m.role === 'user') out.push({ type: 'message', role: 'user', content: m.content });
    else if (m.role === 'tool')
      out.push({ type: 'function_call_output', call_id: m.call_id, output: m.content });
    else if (m.native?.provider === 'openai-responses') out.push(...(m.native.blocks as Item[]));
    else {
      if (m.content !== '') out.push({ type: 'message', role: 'assistant', content: m.content });
      for (const c of m.tool_calls ?? [])
        out.push({ type: 'function_call', call_id: c.id, name: c.name, arguments: c.arguments });
    }
  }
  return out as unknown as ResponseInputItem[];
}
