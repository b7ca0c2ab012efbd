import {
  AgentMeshError,
  ErrorCode,
  publishJson,
  silentLogger,
  subjects,
  type BackoffOptions,
  type Backend,
  type CatalogAvailability,
  type Logger,
} from '@agentmesh/protocol';
import type { Tool } from '../define-tool.js';
import { isMcpToolSelected, type McpConfig, type McpServerConfig } from './config.js';
import { McpConnection, type McpServerState } from './connection.js';
import { mcpTool } from './tools.js';

/** What `agentmesh mcp list` shows of one server. */
export interface McpServerStatus {
  name: string;
  transport: 'stdio' | 'http';
  state: McpServerState | 'failed';
  tools: number;
  /** Why the server or some of its tools were left out. */
  problems: string[];
}

export interface McpToolSourceOptions {
  /** Only these servers (`--mcp NAME[,NAME]`); default every configured server. Unknown names are errors. */
  only?: string[] | undefined;
  logger?: Logger;
  reconnect?: BackoffOptions;
  /** Told when a server goes away (false) and comes back (true), e.g. to mark its tools in the catalog. */
  onAvailability?: (server: string, available: boolean) => void;
}

interface ServerEntry {
  name: string;
  config: McpServerConfig;
  connection: McpConnection;
  tools: Tool[];
  problems: string[];
  failed: boolean;
}

/**
 * The configured MCP servers as tool sources. {@link McpToolSource.connect} reaches every server at once; a server
 * that cannot be reached, or a tool that cannot be turned into an agentmesh tool, is reported (named) and left out
 * without affecting the others.
 */
export class McpToolSource {
  private constructor(
    private readonly entries: ServerEntry[],
    private readonly listeners: ((server: string, available: boolean) => void)[],
  ) {}

  static async connect(
    config: McpConfig | undefined,
    options: McpToolSourceOptions = {},
  ): Promise<McpToolSource> {
    const logger = options.logger ?? silentLogger();
    const servers = config?.servers ?? {};
    const names = options.only ?? Object.keys(servers);
    for (const name of names)
      if (servers[name] === undefined)
        throw new AgentMeshError(
          ErrorCode.InvalidConfig,
          `unknown MCP server "${name}" (configured: ${Object.keys(servers).join(', ') || 'none'}; see mcp.servers)`,
        );
    const listeners: ((server: string, available: boolean) => void)[] = [];
    const notify = (server: string, available: boolean) => {
      options.onAvailability?.(server, available);
      for (const listener of listeners) listener(server, available);
    };
    const entries = await Promise.all(
      names.map((name) =>
        openServer(name, servers[name] as McpServerConfig, logger, { ...options, onAvailability: notify }),
      ),
    );
    return new McpToolSource(entries, listeners);
  }

  /** The agentmesh tools of every server that connected, for a worker's `tools`. */
  get tools(): Tool[] {
    return this.entries.flatMap((e) => e.tools);
  }

  /** The connection of one server (tests, `mcp list`). */
  connection(name: string): McpConnection | undefined {
    return this.entries.find((e) => e.name === name)?.connection;
  }

  /**
   * Tells the catalog (every replica) when a server's tools cannot run and when they can again, as the tools of
   * worker `workerId`: meanwhile tool_search leaves them out and `catalog.get` answers `tool_unavailable` (calls get it from the worker).
   */
  reportTo(bus: Backend, workerId: string, prefix?: string): void {
    const subject = subjects(prefix).catalogAvailability;
    this.listeners.push((server, available) => {
      const tools = this.entries.find((e) => e.name === server)?.tools.map((t) => t.name) ?? [];
      if (tools.length === 0) return;
      const notice: CatalogAvailability = { worker_id: workerId, tools, available };
      publishJson(bus, subject, notice);
    });
  }

  status(): McpServerStatus[] {
    return this.entries.map((e) => ({
      name: e.name,
      transport: e.config.url === undefined ? 'stdio' : 'http',
      state: e.failed ? 'failed' : e.connection.state,
      tools: e.tools.length,
      problems: [...e.problems],
    }));
  }

  async close(): Promise<void> {
    await Promise.all(this.entries.map((e) => e.connection.close()));
  }
}

async function openServer(
  name: string,
  config: McpServerConfig,
  logger: Logger,
  options: McpToolSourceOptions,
): Promise<ServerEntry> {
  const log = logger.child({ mcp_server: name });
  const connection = new McpConnection(name, config, {
    logger,
    ...(options.reconnect === undefined ? {} : { reconnect: options.reconnect }),
    onAvailability: (available) => {
      log.info({ available }, 'MCP server availability changed');
      options.onAvailability?.(name, available);
    },
    onToolsChanged: (tools) =>
      log.warn(
        { tools: tools.map((t) => t.name) },
        'MCP server changed its tools; tools it removed answer tool_unavailable, new ones need a worker restart',
      ),
  });
  const entry: ServerEntry = { name, config, connection, tools: [], problems: [], failed: false };
  try {
    const infos = await connection.connect();
    const byName = new Map<string, string>();
    for (const info of infos) {
      if (!isMcpToolSelected(info.name, config)) continue;
      try {
        const tool = mcpTool({ server: name, config, info, connection });
        const clash = byName.get(tool.name);
        if (clash !== undefined)
          throw new AgentMeshError(
            ErrorCode.Conflict,
            `MCP server "${name}": tools "${clash}" and "${info.name}" both become ${tool.name}; deny one in mcp.servers.${name}.tools.deny`,
          );
        byName.set(tool.name, info.name);
        entry.tools.push(tool);
      } catch (error) {
        if ((error as AgentMeshError).code === ErrorCode.Conflict) throw error;
        entry.problems.push((error as Error).message);
        log.error({ err: (error as Error).message, tool: info.name }, 'MCP tool left out');
      }
    }
    log.info({ tools: entry.tools.length, left_out: entry.problems.length }, 'MCP server connected');
  } catch (error) {
    entry.failed = true;
    entry.tools = [];
    entry.problems.push((error as Error).message);
    log.error({ err: (error as Error).message }, 'MCP server left out');
    await connection.close();
  }
  return entry;
}
