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
import { McpConnection, type McpServerState, type McpToolInfo } from './connection.js';
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

/** Tools a server added (or changed) and the names of those it dropped (or changed), after `tools/list_changed`. */
export interface McpToolsChange {
  add: Tool[];
  remove: string[];
}

/** What a source keeps in step with a server's tool list: a running worker ({@link ToolWorker.updateTools}). */
export interface McpToolsTarget {
  updateTools(change: McpToolsChange): Promise<void>;
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
  private readonly targets: McpToolsTarget[] = [];
  private changes: Promise<void> = Promise.resolve();

  private constructor(
    private readonly entries: ServerEntry[],
    private readonly listeners: ((server: string, available: boolean) => void)[],
    private readonly logger: Logger,
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
    const built: { source?: McpToolSource } = {};
    const onToolsChanged = (entry: ServerEntry, infos: McpToolInfo[]) =>
      built.source?.toolsChanged(entry, infos);
    const entries = await Promise.all(
      names.map((name) =>
        openServer(name, servers[name] as McpServerConfig, logger, {
          ...options,
          onAvailability: notify,
          onToolsChanged,
        }),
      ),
    );
    built.source = new McpToolSource(entries, listeners, logger);
    return built.source;
  }

  /**
   * Keeps `target` (the worker serving {@link tools}) in step with the servers: when a server's tool list changes
   * (`notifications/tools/list_changed`, or other tools after a reconnect), new tools are added and served at once and
   * dropped ones removed, without a restart.
   */
  keepInSync(target: McpToolsTarget): void {
    this.targets.push(target);
  }

  /** Resolves once every tool-list change seen so far reached the targets (tests, shutdown). */
  settled(): Promise<void> {
    return this.changes;
  }

  private toolsChanged(entry: ServerEntry, infos: McpToolInfo[]): void {
    this.changes = this.changes.then(() => this.applyChange(entry, infos));
  }

  private async applyChange(entry: ServerEntry, infos: McpToolInfo[]): Promise<void> {
    const log = this.logger.child({ mcp_server: entry.name });
    try {
      const built = buildTools(entry, infos, log);
      const change = diffTools(entry.tools, built.tools);
      entry.tools = built.tools;
      entry.problems = built.problems;
      log.info(
        { added: change.add.map((t) => t.name), removed: change.remove },
        'MCP server changed its tools',
      );
      if (change.add.length === 0 && change.remove.length === 0) return;
      for (const target of this.targets) await target.updateTools(change);
    } catch (error) {
      entry.problems.push((error as Error).message);
      log.error({ err: (error as Error).message }, 'MCP tool list change not applied');
    }
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

/** The server's listed tools as agentmesh tools: selected, converted, clashes fail loudly, bad ones named and left out. */
function buildTools(
  entry: Pick<ServerEntry, 'name' | 'config' | 'connection'>,
  infos: McpToolInfo[],
  log: Logger,
): { tools: Tool[]; problems: string[] } {
  const { name, config, connection } = entry;
  const tools: Tool[] = [];
  const problems: string[] = [];
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
      tools.push(tool);
    } catch (error) {
      if ((error as AgentMeshError).code === ErrorCode.Conflict) throw error;
      problems.push((error as Error).message);
      log.error({ err: (error as Error).message, tool: info.name }, 'MCP tool left out');
    }
  }
  return { tools, problems };
}

/** What changed between two tool lists of one server: new or changed tools to add, gone or changed ones to remove. */
function diffTools(before: Tool[], after: Tool[]): McpToolsChange {
  const old = new Map(before.map((t) => [t.name, JSON.stringify(t.spec)]));
  const now = new Map(after.map((t) => [t.name, JSON.stringify(t.spec)]));
  return {
    add: after.filter((t) => old.get(t.name) !== now.get(t.name)),
    remove: before.filter((t) => now.get(t.name) !== old.get(t.name)).map((t) => t.name),
  };
}

async function openServer(
  name: string,
  config: McpServerConfig,
  logger: Logger,
  options: McpToolSourceOptions & { onToolsChanged: (entry: ServerEntry, infos: McpToolInfo[]) => void },
): Promise<ServerEntry> {
  const log = logger.child({ mcp_server: name });
  const connection = new McpConnection(name, config, {
    logger,
    ...(options.reconnect === undefined ? {} : { reconnect: options.reconnect }),
    onAvailability: (available) => {
      log.info({ available }, 'MCP server availability changed');
      options.onAvailability?.(name, available);
    },
    onToolsChanged: (infos) => options.onToolsChanged(entry, infos),
  });
  const entry: ServerEntry = { name, config, connection, tools: [], problems: [], failed: false };
  try {
    const built = buildTools(entry, await connection.connect(), log);
    entry.tools = built.tools;
    entry.problems = built.problems;
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
