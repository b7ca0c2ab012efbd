import { z } from 'zod';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import {
  AgentMeshError,
  ErrorCode,
  ToolSpecSchema,
  describeZodError,
  toolNameProblem,
  type ToolSpec,
} from '@agentmesh/protocol';
import type { ValidateFunction } from 'ajv/dist/2020.js';
import type { Tool, ToolContext } from '../define-tool.js';
import { resolvePolicy } from '../policy.js';
import { checkValue, compileJsonSchema, type JsonSchema } from '../schema.js';
import { mcpToolPolicy, type McpServerConfig } from './config.js';
import type { McpConnection, McpToolInfo } from './connection.js';

function canonicalSegment(text: string): string {
  const lowered = text
    .toLowerCase()
    .replace(/[^a-z0-9_]/g, '_')
    .replace(/_+/g, '_')
    .replace(/^_+|_+$/g, '');
  if (lowered === '') return 'x';
  return /^[a-z]/.test(lowered) ? lowered : `x_${lowered}`;
}

/** The canonical agentmesh name of an MCP tool: `mcp.<server>.<tool>`, lowercased, other characters to `_`. */
export function mcpToolName(server: string, tool: string): string {
  const name = `mcp.${canonicalSegment(server)}.${canonicalSegment(tool)}`;
  const problem = toolNameProblem(name);
  if (problem !== undefined)
    throw new AgentMeshError(
      ErrorCode.InvalidToolName,
      `MCP server "${server}": tool "${tool}" cannot be named "${name}": ${problem}`,
      { details: { server, tool, name } },
    );
  return name;
}

const anyValue = z.unknown();

function textOf(result: CallToolResult): string {
  const parts = result.content.map((block) => {
    if (block.type === 'text') return block.text;
    if (block.type === 'image' || block.type === 'audio')
      return `[${block.type} ${block.mimeType}, ${Math.round((block.data.length * 3) / 4)} bytes]`;
    if (block.type === 'resource_link')
      return `[resource ${block.uri}${block.name ? ` (${block.name})` : ''}]`;
    const resource = block.resource;
    return 'text' in resource
      ? resource.text
      : `[resource ${resource.uri}, ${resource.mimeType ?? 'binary'}]`;
  });
  return parts.join('\n');
}

export interface McpToolOptions {
  server: string;
  config: McpServerConfig;
  info: McpToolInfo;
  connection: McpConnection;
}

function mcpSpec(options: McpToolOptions, name: string): ToolSpec {
  const { server, config, info } = options;
  const what = `MCP server "${server}": tool "${info.name}"`;
  const input = info.inputSchema as JsonSchema;
  if (input['type'] !== 'object')
    throw new AgentMeshError(
      ErrorCode.InvalidConfig,
      `${what} has an input schema that is not an object (type ${JSON.stringify(input['type'])})`,
      { details: { server, tool: info.name } },
    );
  const policy = mcpToolPolicy(info.name, config);
  const retry = resolvePolicy(
    { max_attempts: 1 + (policy.retries ?? 0), retry_on: ['transient', 'timeout'] },
    policy.timeout_ms,
  );
  const hints = info.annotations ?? {};
  const parsed = ToolSpecSchema.safeParse({
    name,
    version: '1',
    description: (info.description ?? info.title ?? `${info.name} (MCP server ${server})`).slice(0, 4000),
    namespace: 'mcp',
    input_schema: input,
    ...(info.outputSchema === undefined ? {} : { output_schema: info.outputSchema }),
    safety: {
      read_only: policy.read_only ?? hints.readOnlyHint ?? false,
      mutating: hints.readOnlyHint === true ? false : (hints.destructiveHint ?? false),
      networked: hints.openWorldHint ?? false,
      needs_confirmation: policy.needs_confirmation ?? false,
    },
    timeout_ms: retry.timeout_ms,
    retry,
    idempotent: hints.idempotentHint ?? false,
    loading: config.deferred === false ? 'always' : 'deferred',
    cpu_bound: false,
    tags: ['mcp', `mcp:${server}`],
  });
  if (!parsed.success)
    throw new AgentMeshError(
      ErrorCode.InvalidConfig,
      `${what} gives an invalid spec: ${describeZodError(parsed.error)}`,
    );
  return parsed.data;
}

/**
 * An MCP server's tool as an ordinary agentmesh {@link Tool}: its input schema (and output schema when given) is
 * compiled once and checked on every call; a call goes to the server through the connection with the call's signal;
 * an `isError` result is a `tool_error` the model sees; `structuredContent` is the output when there is an output
 * schema, the text of the content otherwise.
 */
export function mcpTool(options: McpToolOptions): Tool<Record<string, unknown>, unknown> {
  const { server, info, connection } = options;
  const name = mcpToolName(server, info.name);
  const spec = mcpSpec(options, name);
  const what = `the input schema of MCP tool ${name}`;
  const checkInput: ValidateFunction = compileJsonSchema(spec.input_schema, what);
  const checkOutputSchema =
    spec.output_schema === undefined
      ? undefined
      : compileJsonSchema(spec.output_schema, `the output schema of MCP tool ${name}`);
  const parseArguments = (args: unknown): Record<string, unknown> =>
    checkValue(
      args ?? {},
      () => checkInput,
      anyValue,
      ErrorCode.InvalidArguments,
      `arguments for ${name}`,
    ) as Record<string, unknown>;
  const checkOutput = (output: unknown): unknown =>
    checkOutputSchema === undefined || typeof output === 'string'
      ? output
      : checkValue(output, () => checkOutputSchema, anyValue, ErrorCode.InvalidOutput, `output of ${name}`);
  const runHandler = async (args: Record<string, unknown>, ctx: ToolContext): Promise<unknown> => {
    const result = await connection.callTool(info.name, args, {
      signal: ctx.signal,
      timeoutMs: spec.timeout_ms + 1000,
    });
    if (result.isError === true)
      throw new AgentMeshError(ErrorCode.ToolError, textOf(result) || `MCP tool ${info.name} failed`, {
        retryable: false,
        details: { server },
      });
    if (checkOutputSchema !== undefined && result.structuredContent !== undefined)
      return result.structuredContent;
    return textOf(result);
  };
  return {
    name,
    spec,
    policy: spec.retry,
    cpu: undefined,
    parseArguments,
    checkOutput,
    runHandler,
    async invoke(args: unknown, context: Partial<ToolContext> = {}): Promise<unknown> {
      const signal = context.signal ?? new AbortController().signal;
      return checkOutput(await runHandler(parseArguments(args), { ...context, signal } as ToolContext));
    },
  };
}
