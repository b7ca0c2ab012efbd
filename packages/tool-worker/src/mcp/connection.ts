import { z } from 'zod';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { CallToolResult, Tool as McpToolInfo } from '@modelcontextprotocol/sdk/types.js';
import {
  AgentMeshError,
  ErrorCode,
  retry,
  silentLogger,
  type BackoffOptions,
  type Logger,
} from '@agentmesh/protocol';
import { substituteEnv, type McpServerConfig } from './config.js';

export type { McpToolInfo };

/** The MCP client SDK, loaded with the first connection: a process that connects to no MCP server never loads it. */
async function loadSdk() {
  const [client, stdio, http, types] = await Promise.all([
    import('@modelcontextprotocol/sdk/client/index.js'),
    import('@modelcontextprotocol/sdk/client/stdio.js'),
    import('@modelcontextprotocol/sdk/client/streamableHttp.js'),
    import('@modelcontextprotocol/sdk/types.js'),
  ]);
  return {
    Client: client.Client,
    StdioClientTransport: stdio.StdioClientTransport,
    StreamableHTTPClientTransport: http.StreamableHTTPClientTransport,
    McpError: types.McpError,
    McpErrorCode: types.ErrorCode,
    ToolListChangedNotificationSchema: types.ToolListChangedNotificationSchema,
  };
}
type McpSdk = Awaited<ReturnType<typeof loadSdk>>;
let sdkLoaded: Promise<McpSdk> | undefined;

/** Where a connection to one MCP server stands. */
export type McpServerState = 'new' | 'connecting' | 'connected' | 'reconnecting' | 'closed';

export interface McpConnectionOptions {
  logger?: Logger;
  /** Backoff between reconnection attempts (default 200 ms doubling up to 10 s). */
  reconnect?: BackoffOptions;
  /** Told when the server goes away (false) and when it is back with its tools listed again (true). */
  onAvailability?: (available: boolean) => void;
  /** Told when the server's tool list changed (a `tools/list_changed` notice, or different tools after a reconnect). */
  onToolsChanged?: (tools: McpToolInfo[]) => void;
}

const STDERR_KEPT = 2048;
const LenientToolListSchema = z
  .object({
    tools: z.array(z.object({ name: z.string() }).passthrough()),
    nextCursor: z.string().optional(),
  })
  .passthrough();
const DEFAULT_RECONNECT: BackoffOptions = { baseMs: 200, capMs: 10_000, jitter: 0.2 };

function toolsKey(tools: McpToolInfo[]): string {
  return JSON.stringify(tools.map((t) => [t.name, t.inputSchema, t.outputSchema, t.description]));
}

/**
 * One MCP server reached through the official SDK client: stdio (a child process) or streamable HTTP. Lists its
 * tools, calls them with the caller's AbortSignal (the SDK sends an MCP cancellation on abort), and reconnects with
 * `retry()` backoff when the server crashes or drops; calls meanwhile fail at once with a retryable `tool_unavailable`.
 */
export class McpConnection {
  private client: Client | undefined;
  private sdk: McpSdk | undefined;
  private currentState: McpServerState = 'new';
  private listed: McpToolInfo[] = [];
  private stderrTail = '';
  private readonly lifecycle = new AbortController();
  private readonly logger: Logger;

  constructor(
    readonly server: string,
    private readonly config: McpServerConfig,
    private readonly options: McpConnectionOptions = {},
  ) {
    this.logger = (options.logger ?? silentLogger()).child({ mcp_server: server });
  }

  get state(): McpServerState {
    return this.currentState;
  }

  /** The tools the server listed on the last (re)connection or list change. */
  get tools(): McpToolInfo[] {
    return this.listed;
  }

  /** The child's pid for a stdio server while connected (tests kill it to see a reconnect). */
  get pid(): number | undefined {
    const transport = this.client?.transport;
    return this.sdk !== undefined && transport instanceof this.sdk.StdioClientTransport
      ? (transport.pid ?? undefined)
      : undefined;
  }

  /** Connects once and lists the tools; a failure is an `invalid_config` / `unavailable` error naming the server. */
  async connect(): Promise<McpToolInfo[]> {
    if (this.currentState !== 'new')
      throw new AgentMeshError(ErrorCode.Conflict, `MCP server "${this.server}" was already connected`);
    this.currentState = 'connecting';
    try {
      await this.open();
    } catch (error) {
      this.currentState = 'closed';
      throw error;
    }
    return this.listed;
  }

  /** Calls one tool of the server. Protocol errors are named errors; `isError` results are returned as they are. */
  async callTool(
    name: string,
    args: Record<string, unknown>,
    options: { signal: AbortSignal; timeoutMs: number },
  ): Promise<CallToolResult> {
    const client = this.client;
    if (this.currentState !== 'connected' || client === undefined) throw this.unavailable();
    if (!this.listed.some((t) => t.name === name))
      throw new AgentMeshError(
        ErrorCode.ToolUnavailable,
        `MCP server "${this.server}" no longer offers tool "${name}" (its tool list changed)`,
        { retryable: false, details: { server: this.server, tool: name } },
      );
    try {
      return (await client.callTool({ name, arguments: args }, undefined, {
        signal: options.signal,
        timeout: options.timeoutMs,
      })) as CallToolResult;
    } catch (error) {
      if (options.signal.aborted) throw AgentMeshError.from(options.signal.reason ?? error);
      throw this.callError(name, error);
    }
  }

  /** Stops reconnecting and closes the transport (a stdio server's process ends). */
  async close(): Promise<void> {
    this.currentState = 'closed';
    this.lifecycle.abort(new AgentMeshError(ErrorCode.Closed, `MCP server "${this.server}" was closed`));
    const client = this.client;
    this.client = undefined;
    await client?.close().catch(() => undefined);
  }

  private unavailable(): AgentMeshError {
    return new AgentMeshError(
      ErrorCode.ToolUnavailable,
      `MCP server "${this.server}" is ${this.currentState === 'closed' ? 'closed' : 'not connected (reconnecting)'}; try again shortly`,
      { retryable: this.currentState !== 'closed', details: { server: this.server } },
    );
  }

  private callError(tool: string, error: unknown): AgentMeshError {
    const sdk = this.sdk;
    if (sdk === undefined || !(error instanceof sdk.McpError))
      return this.currentState === 'connected'
        ? new AgentMeshError(
            ErrorCode.McpError,
            `MCP server "${this.server}" failed on tool "${tool}": ${(error as Error).message}`,
            { retryable: false, cause: error, details: { server: this.server } },
          )
        : this.unavailable();
    if (error.code === (sdk.McpErrorCode.RequestTimeout as number))
      return new AgentMeshError(
        ErrorCode.Timeout,
        `MCP server "${this.server}" did not answer "${tool}" in time`,
        {
          details: { server: this.server },
        },
      );
    if (error.code === (sdk.McpErrorCode.ConnectionClosed as number)) return this.unavailable();
    return new AgentMeshError(
      ErrorCode.McpError,
      `MCP server "${this.server}" refused tool "${tool}" (MCP error ${error.code}): ${error.message}`,
      { retryable: false, details: { server: this.server, mcp_code: error.code } },
    );
  }

  private transport(sdk: McpSdk): Transport {
    const { config, server } = this;
    if (config.url !== undefined) {
      let url: URL;
      try {
        url = new URL(substituteEnv(config.url, server));
      } catch (error) {
        if (error instanceof AgentMeshError) throw error;
        throw new AgentMeshError(
          ErrorCode.InvalidConfig,
          `MCP server "${server}": url "${config.url}" is not a URL`,
        );
      }
      const headers = Object.fromEntries(
        Object.entries(config.headers ?? {}).map(([k, v]) => [k, substituteEnv(v, server)]),
      );
      return new sdk.StreamableHTTPClientTransport(url, { requestInit: { headers } });
    }
    const env = Object.fromEntries(
      Object.entries(config.env ?? {}).map(([k, v]) => [k, substituteEnv(v, server)]),
    );
    const transport = new sdk.StdioClientTransport({
      command: config.command ?? '',
      args: config.args ?? [],
      env: { ...(process.env as Record<string, string>), ...env },
      ...(config.cwd === undefined ? {} : { cwd: config.cwd }),
      stderr: 'pipe',
    });
    transport.stderr?.on('data', (chunk: Buffer) => {
      this.stderrTail = (this.stderrTail + chunk.toString('utf8')).slice(-STDERR_KEPT);
    });
    return transport;
  }

  private async open(): Promise<void> {
    const sdk = (this.sdk ??= await (sdkLoaded ??= loadSdk()));
    const client = new sdk.Client({ name: 'agentmesh', version: '0.1.0' }, { capabilities: {} });
    const timeout = this.config.connect_timeout_ms ?? 15_000;
    this.stderrTail = '';
    try {
      await client.connect(this.transport(sdk), { timeout, signal: this.lifecycle.signal });
      if (client.getServerCapabilities()?.tools === undefined)
        throw new AgentMeshError(ErrorCode.InvalidConfig, `MCP server "${this.server}" offers no tools`);
      this.listed = await this.listAll(client, timeout);
    } catch (error) {
      await client.close().catch(() => undefined);
      throw this.connectError(error);
    }
    client.setNotificationHandler(sdk.ToolListChangedNotificationSchema, () => void this.relist());
    client.onclose = () => this.onClosed(client);
    this.client = client;
    this.currentState = 'connected';
  }

  private connectError(error: unknown): AgentMeshError {
    if (error instanceof AgentMeshError && error.code === ErrorCode.InvalidConfig) return error;
    const how =
      this.config.url !== undefined ? `at ${this.config.url}` : `(command "${this.config.command ?? ''}")`;
    const stderr = this.stderrTail.trim();
    return new AgentMeshError(
      ErrorCode.Unavailable,
      `MCP server "${this.server}" ${how} could not be reached: ${(error as Error).message}` +
        (stderr === '' ? '' : `; its stderr: ${stderr.slice(-400)}`),
      { cause: error, details: { server: this.server } },
    );
  }

  /**
   * Lists through the SDK with a lenient result schema, so one malformed tool (say, an input schema that is not an
   * object) is named and left out by the caller instead of failing the whole list.
   */
  private async listAll(client: Client, timeout: number): Promise<McpToolInfo[]> {
    const tools: McpToolInfo[] = [];
    let cursor: string | undefined;
    do {
      const page = await client.request(
        { method: 'tools/list', params: cursor === undefined ? {} : { cursor } },
        LenientToolListSchema,
        { timeout },
      );
      tools.push(...(page.tools as McpToolInfo[]));
      cursor = page.nextCursor;
    } while (cursor !== undefined && tools.length < 10_000);
    return tools;
  }

  private async relist(): Promise<void> {
    const client = this.client;
    if (client === undefined || this.currentState !== 'connected') return;
    try {
      const before = toolsKey(this.listed);
      this.listed = await this.listAll(client, this.config.connect_timeout_ms ?? 15_000);
      if (toolsKey(this.listed) !== before) this.options.onToolsChanged?.(this.listed);
    } catch (error) {
      this.logger.warn({ err: (error as Error).message }, 'MCP tools/list after list_changed failed');
    }
  }

  private onClosed(client: Client): void {
    if (this.client !== client || this.currentState === 'closed') return;
    this.client = undefined;
    this.currentState = 'reconnecting';
    this.logger.warn({ stderr: this.stderrTail.trim().slice(-400) }, 'MCP server dropped; reconnecting');
    this.options.onAvailability?.(false);
    void this.reconnect();
  }

  private async reconnect(): Promise<void> {
    const before = toolsKey(this.listed);
    try {
      await retry(() => this.open(), {
        ...DEFAULT_RECONNECT,
        ...this.options.reconnect,
        signal: this.lifecycle.signal,
        retryable: () => true,
        onRetry: (error, attempt, delayMs) =>
          this.logger.info({ attempt, retry_ms: delayMs, err: error.message }, 'MCP reconnect failed'),
      });
    } catch (error) {
      if (!this.lifecycle.signal.aborted)
        this.logger.error({ err: (error as Error).message }, 'MCP reconnecting gave up');
      return;
    }
    this.logger.info({ tools: this.listed.length }, 'MCP server reconnected');
    if (toolsKey(this.listed) !== before) this.options.onToolsChanged?.(this.listed);
    this.options.onAvailability?.(true);
  }
}
