import type {
  ChatMessage,
  ChatToolCall,
  ModelDelta,
  ModelProvider,
  ModelRequest,
  ModelTool,
  ModelTurn,
} from './types.js';

/** The fence language of a tool call in text mode. */
export const TOOL_CALL_FENCE = 'tool_call';

/** The name given to a block whose tool name cannot be read: no tool has it, so the call fails closed. */
export const MALFORMED_CALL_NAME = 'malformed_tool_call';

const BLOCK = /```tool_call[^\S\n]*\n([\s\S]*?)```/g;

/** The system prompt section that lists the tools and the calling convention. */
export function renderToolPrompt(tools: readonly ModelTool[]): string {
  const lines = [
    '# Tools',
    'You can call the tools below. To call one, reply with a fenced block like this, with the exact tool name and',
    'a JSON object of arguments that matches its schema:',
    '',
    '```tool_call',
    '{"name": "tool.name", "arguments": {"key": "value"}}',
    '```',
    '',
    'Several blocks in one reply are run in parallel. After your calls you receive their results in the next',
    'message; then continue, or answer without any tool_call block when you are done.',
    '',
  ];
  for (const t of tools)
    lines.push(
      `## ${t.name}`,
      t.description,
      `Arguments (JSON Schema): ${JSON.stringify(t.input_schema)}`,
      '',
    );
  return lines.join('\n');
}

/**
 * Reads the fenced tool_call blocks of a reply. A block that is not a JSON object with a string `name` becomes a
 * call that cannot run: its arguments are the raw text (invalid JSON), and its name is the tool name when one can
 * be read, otherwise {@link MALFORMED_CALL_NAME}. The loop answers both with a corrective error, like an invalid
 * native call.
 */
export function parseToolBlocks(reply: string, idPrefix: string): { text: string; calls: ChatToolCall[] } {
  const calls: ChatToolCall[] = [];
  const text = reply.replace(BLOCK, (_match, body: string) => {
    const id = `${idPrefix}_${calls.length + 1}`;
    calls.push({ id, ...readBlock(body.trim()) });
    return '';
  });
  return { text: text.replace(/\n{3,}/g, '\n\n').trim(), calls };
}

function readBlock(body: string): { name: string; arguments: string } {
  let value: unknown;
  try {
    value = JSON.parse(body) as unknown;
  } catch {
    const name = /"name"\s*:\s*"([^"]+)"/.exec(body)?.[1];
    return { name: name ?? MALFORMED_CALL_NAME, arguments: body === '' ? '(empty block)' : body };
  }
  const v = value as { name?: unknown; arguments?: unknown };
  if (value === null || typeof value !== 'object' || typeof v.name !== 'string')
    return { name: MALFORMED_CALL_NAME, arguments: `not a {"name", "arguments"} object: ${body}` };
  const args = v.arguments ?? {};
  return { name: v.name, arguments: typeof args === 'string' ? args : JSON.stringify(args) };
}

function renderCall(call: ChatToolCall): string {
  let args: unknown = call.arguments;
  try {
    args = JSON.parse(call.arguments) as unknown;
  } catch {
    // keep the raw text the model wrote
  }
  return `\`\`\`${TOOL_CALL_FENCE}\n${JSON.stringify({ name: call.name, arguments: args })}\n\`\`\``;
}

/** Rewrites a native transcript into plain user/assistant text: calls as blocks, results as one user message. */
export function toTextTranscript(messages: readonly ChatMessage[]): ChatMessage[] {
  const out: ChatMessage[] = [];
  let results: string[] = [];
  const flush = () => {
    if (results.length === 0) return;
    out.push({ role: 'user', content: `Tool results:\n\n${results.join('\n\n')}` });
    results = [];
  };
  for (const m of messages) {
    if (m.role === 'tool') {
      results.push(`[${m.call_id}] ${m.name}${m.is_error ? ' (error)' : ''}:\n${m.content}`);
      continue;
    }
    flush();
    if (m.role === 'user') out.push(m);
    else {
      const parts = [m.content, ...(m.tool_calls ?? []).map(renderCall)].filter((p) => p !== '');
      out.push({ role: 'assistant', content: parts.join('\n\n') });
    }
  }
  flush();
  return out;
}

/**
 * Tool calling for models without it: no tools go on the wire; the tool list is rendered into the system prompt,
 * and fenced ```tool_call blocks in the reply become ordinary tool calls. The loop above sees a native provider.
 */
export class TextToolProtocol implements ModelProvider {
  constructor(private readonly inner: ModelProvider) {}

  get kind(): ModelProvider['kind'] {
    return this.inner.kind;
  }

  get model(): string {
    return this.inner.model;
  }

  async complete(request: ModelRequest): Promise<ModelTurn> {
    const tools = request.tools.filter((t) => !t.defer_loading);
    // a forced JSON response format would leave no room for tool call blocks: the schema goes in the prompt instead
    const schema = tools.length > 0 ? request.outputSchema : undefined;
    const system =
      tools.length === 0
        ? request.system
        : [request.system, renderToolPrompt(tools), schema === undefined ? '' : schemaPrompt(schema)]
            .filter(Boolean)
            .join('\n\n');
    const { nativeSearch: _nativeSearch, ...all } = request;
    const rest = schema === undefined ? all : { ...all, outputSchema: undefined };
    const onDelta = request.onDelta;
    const turn = await this.inner.complete({
      ...rest,
      system,
      tools: [],
      messages: toTextTranscript(request.messages),
      // the streamed text holds the tool call blocks: only reasoning streams, the text comes with the response
      ...(onDelta === undefined
        ? {}
        : { onDelta: (d: ModelDelta) => (d.kind === 'reasoning' ? onDelta(d) : undefined) }),
    });
    const turns = request.messages.filter((m) => m.role === 'assistant').length;
    const { text, calls } = parseToolBlocks(turn.text, `text_${turns + 1}`);
    const { native: _native, ...plain } = turn;
    return { ...plain, text, tool_calls: [...turn.tool_calls, ...calls] };
  }
}

const NO_TOOL_SUPPORT =
  /does not support tools|tools? (are|is) not supported|tool[_ ]?(use|calling|choice)? ?(is )?not supported/i;

/**
 * Native tool calls, switching to the text protocol for the rest of the run when the server answers that the model
 * has no tool support (Ollama: "... does not support tools"). Used by the Ollama and Hugging Face presets.
 */
export class NativeOrTextProtocol implements ModelProvider {
  private text: TextToolProtocol | undefined;
  constructor(private readonly inner: ModelProvider) {}

  get kind(): ModelProvider['kind'] {
    return this.inner.kind;
  }

  get model(): string {
    return this.inner.model;
  }

  async complete(request: ModelRequest): Promise<ModelTurn> {
    if (this.text) return this.text.complete(request);
    try {
      return await this.inner.complete(request);
    } catch (error) {
      if (request.tools.length === 0 || !NO_TOOL_SUPPORT.test((error as Error).message)) throw error;
      this.text = new TextToolProtocol(this.inner);
      return this.text.complete(request);
    }
  }
}

function schemaPrompt(schema: Record<string, unknown>): string {
  return `When the task is done, reply with only a JSON value matching this JSON Schema:\n${JSON.stringify(schema)}`;
}
