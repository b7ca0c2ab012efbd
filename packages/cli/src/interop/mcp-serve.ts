import { randomUUID } from 'node:crypto';
import { createServer, type Server as HttpServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CallToolRequestSchema,
  ListToolsRequestSchema,
  type CallToolResult,
  type Tool as McpTool,
} from '@modelcontextprotocol/sdk/types.js';
import {
  AgentMeshError,
  CatalogGetReplySchema,
  CatalogListReplySchema,
  CatalogSearchReplySchema,
  ErrorCode,
  invokeTool,
  matchesAnyToolPattern,
  requestJson,
  subjects,
  type Backend,
  type Logger,
  type ToolSpec,
} from '@agentmesh/protocol';
import { allowedHosts, bearerToken, tokenMatches } from '../http-access.js';

/** What the MCP face of the catalog exposes, with the same meaning as `run`'s flags. */
export interface McpServeOptions {
  bus: Backend;
  prefix: string;
  logger: Logger;
  /** `--tools`: canonical names, namespaces or globs a client may see and call. */
  allow?: string[] | undefined;
  /** `--deferred` / `tools.deferred`: reached only through tool_search. */
  deferred?: string[] | undefined;
  always?: string[] | undefined;
  /** Per-call deadline (default 120 s). */
  callTimeoutMs?: number;
  /**
   * `--allow-tools`: when set, a tool with side effects (not read-only, mutating, or needing confirmation) is
   * listed, found and callable only if one of these names, namespaces or globs matches it. Unset: no such gate.
   */
  sideEffectTools?: string[] | undefined;
}

/** The streamable HTTP face: where it listens, and the bearer token every request must carry. */
export interface McpHttpOptions extends McpServeOptions {
  port: number;
  host?: string;
  /** Every request must send `Authorization: Bearer <token>`. */
  token: string;
}

/** Whether a tool changes anything outside itself (what `--allow-tools` must name to offer it over HTTP). */
export function hasSideEffects(spec: ToolSpec): boolean {
  return !spec.safety.read_only || spec.safety.mutating || spec.safety.needs_confirmation === true;
}

const SEARCH_TOOL: McpTool = {
  name: 'tool_search',
  description:
    'Searches the tools that are not listed up front (deferred tools) and returns the best matches with their ' +
    'input schemas; call a found tool by its name with tools/call.',
  inputSchema: {
    type: 'object',
    properties: {
      query: { type: 'string', description: 'what the tool should do, in a few words' },
      limit: { type: 'integer', minimum: 1, maximum: 50, description: 'results at most (default 10)' },
    },
    required: ['query'],
  },
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
};

/** An agentmesh tool spec as an MCP tool, annotations from its safety metadata. */
export function specToMcpTool(spec: ToolSpec): McpTool {
  return {
    name: spec.name,
    description: spec.description,
    inputSchema: spec.input_schema as McpTool['inputSchema'],
    ...(spec.output_schema === undefined
      ? {}
      : { outputSchema: spec.output_schema as McpTool['outputSchema'] }),
    annotations: {
      readOnlyHint: spec.safety.read_only,
      destructiveHint: spec.safety.mutating,
      idempotentHint: spec.idempotent,
      openWorldHint: spec.safety.networked,
    },
  };
}

function textResult(text: string, isError = false): CallToolResult {
  return { content: [{ type: 'text', text }], ...(isError ? { isError: true } : {}) };
}

/**
 * One MCP server session over the catalog: tools/list gives the always-exposed tools plus `tool_search` (and the
 * deferred tools this session found, announced with `tools/list_changed`); tools/call runs a call on the mesh
 * through the tool.invoke subjects, so it lands on whichever worker replica serves it.
 */
export function createMcpServer(options: McpServeOptions): Server {
  return new CatalogSession(options).server;
}

/** The handlers of one MCP session, and the deferred tools it has found so far. */
class CatalogSession {
  readonly server = new Server(
    { name: 'agentmesh', version: '0.1.0' },
    { capabilities: { tools: { listChanged: true } } },
  );
  private readonly s: ReturnType<typeof subjects>;
  private readonly scope: { allow?: string[]; deferred?: string[]; always?: string[] };
  private readonly found = new Map<string, McpTool>();

  constructor(private readonly options: McpServeOptions) {
    this.s = subjects(options.prefix);
    this.scope = {
      ...(options.allow === undefined ? {} : { allow: options.allow }),
      ...(options.deferred === undefined ? {} : { deferred: options.deferred }),
      ...(options.always === undefined ? {} : { always: options.always }),
    };
    this.server.setRequestHandler(ListToolsRequestSchema, () => this.listTools());
    this.server.setRequestHandler(CallToolRequestSchema, (request, extra) =>
      this.callTool(request.params.name, request.params.arguments ?? {}, extra.signal),
    );
  }

  private async listTools(): Promise<{ tools: McpTool[] }> {
    const reply = await requestJson(
      this.options.bus,
      this.s.catalogList,
      { ...this.scope, loading: 'always', full: true },
      CatalogListReplySchema,
    );
    const listed = (reply.specs ?? []).filter((spec) => this.offered(spec)).map(specToMcpTool);
    const names = new Set(listed.map((t) => t.name));
    return { tools: [...listed, ...[...this.found.values()].filter((t) => !names.has(t.name)), SEARCH_TOOL] };
  }

  private async callTool(
    name: string,
    args: Record<string, unknown>,
    signal: AbortSignal,
  ): Promise<CallToolResult> {
    if (name === SEARCH_TOOL.name) return this.search(args);
    const known = await this.spec(name).catch((error: unknown) => AgentMeshError.from(error));
    if (known instanceof AgentMeshError) return textResult(`error [${known.code}]: ${known.message}`, true);
    if (!this.offered(known))
      return textResult(
        `error [${ErrorCode.PermissionDenied}]: ${name} has side effects and this MCP server offers such a tool ` +
          'only when --allow-tools names it',
        true,
      );
    const callId = randomUUID();
    const outcome = await invokeTool(
      this.options.bus,
      { call_id: callId, run_id: `mcp-${callId}`, tool: name, arguments: args },
      {
        prefix: this.options.prefix,
        signal,
        timeoutMs: this.options.callTimeoutMs ?? 120_000,
        idempotent: known.idempotent,
      },
    );
    this.options.logger.info({ tool: name, call_id: callId, is_error: outcome.is_error }, 'MCP tools/call');
    const structured =
      !outcome.is_error && known.output_schema !== undefined && typeof outcome.output === 'object'
        ? { structuredContent: outcome.output as Record<string, unknown> }
        : {};
    return { ...textResult(outcome.preview, outcome.is_error), ...structured };
  }

  private offered(spec: ToolSpec): boolean {
    const allowed = this.options.sideEffectTools;
    return allowed === undefined || !hasSideEffects(spec) || matchesAnyToolPattern(spec.name, allowed);
  }

  private async spec(name: string): Promise<ToolSpec> {
    const reply = await requestJson(
      this.options.bus,
      this.s.catalogGet,
      { name, ...this.scope },
      CatalogGetReplySchema,
    );
    return reply.tool;
  }

  private async search(args: Record<string, unknown>): Promise<CallToolResult> {
    const query = args['query'];
    if (typeof query !== 'string' || query.trim() === '')
      return textResult('error [invalid_arguments]: tool_search needs a non-empty "query"', true);
    const limit =
      typeof args['limit'] === 'number' ? Math.min(50, Math.max(1, Math.floor(args['limit']))) : 10;
    const reply = await requestJson(
      this.options.bus,
      this.s.catalogSearch,
      { ...this.scope, query, limit, deferred_only: true },
      CatalogSearchReplySchema,
    );
    const specs = await Promise.all(reply.results.map((r) => this.spec(r.name).catch(() => undefined)));
    const tools = specs.filter((t): t is ToolSpec => t !== undefined && this.offered(t)).map(specToMcpTool);
    const before = this.found.size;
    for (const tool of tools) this.found.set(tool.name, tool);
    if (this.found.size !== before) void this.server.sendToolListChanged().catch(() => undefined);
    const text = JSON.stringify(
      tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.inputSchema })),
    );
    return textResult(tools.length === 0 ? `no deferred tool matches "${query}"` : text);
  }
}

/** Serves one MCP session on stdin/stdout until the client closes it. */
export async function serveMcpStdio(options: McpServeOptions): Promise<void> {
  const server = createMcpServer(options);
  const closed = new Promise<void>((resolve) => (server.onclose = resolve));
  await server.connect(new StdioServerTransport());
  await closed;
}

function refuse(
  res: ServerResponse,
  status: number,
  message: string,
  headers: Record<string, string> = {},
): void {
  res
    .writeHead(status, { 'content-type': 'application/json', ...headers })
    .end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message }, id: null }));
}

/**
 * Serves streamable HTTP at `/mcp` (stateless: each request its own session); resolves once listening. Every
 * request needs the bearer token; the SDK's DNS-rebinding protection refuses a `Host` other than the bound
 * address or a loopback name, and an `Origin` other than those.
 */
export async function serveMcpHttp(options: McpHttpOptions): Promise<HttpServer> {
  const host = options.host ?? '127.0.0.1';
  let hosts: string[] = [];
  const http = createServer((req, res) => {
    if (!req.url?.startsWith('/mcp')) return refuse(res, 404, 'not found: the MCP endpoint is /mcp');
    const presented = bearerToken(req.headers.authorization);
    if (!tokenMatches(presented, options.token))
      return refuse(
        res,
        401,
        presented === undefined
          ? 'this MCP server needs "Authorization: Bearer <token>" (the token mcp serve printed, --token or AGENTMESH_MCP_TOKEN)'
          : "the bearer token is not this MCP server's",
        { 'www-authenticate': 'Bearer' },
      );
    const server = createMcpServer(options);
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableDnsRebindingProtection: true,
      allowedHosts: hosts,
      allowedOrigins: hosts.map((h) => `http://${h}`),
    });
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    server
      .connect(transport)
      .then(() => transport.handleRequest(req, res))
      .catch((error: unknown) => {
        options.logger.error({ err: (error as Error).message }, 'MCP HTTP request failed');
        if (!res.headersSent) res.writeHead(500).end();
      });
  });
  await new Promise<void>((resolve, reject) => {
    http.once('error', (error) =>
      reject(
        new AgentMeshError(
          ErrorCode.InvalidConfig,
          `cannot listen on port ${options.port}: ${error.message}`,
        ),
      ),
    );
    http.listen(options.port, host, resolve);
  });
  hosts = allowedHosts(host, (http.address() as AddressInfo).port);
  return http;
}
