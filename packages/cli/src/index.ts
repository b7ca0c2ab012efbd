export { runCli, COMMANDS, mainUsage, VERSION, type Command } from './cli.js';
export { ConfigSchema, loadConfig, configPath, type AgentMeshConfig } from './config.js';
export { startEmbedded, type EmbeddedMesh, type EmbeddedOptions } from './embedded.js';
export { selectTools, resolveToolEntries, TOOL_PACKS } from './tools.js';
export type { Io } from './context.js';
export {
  createMcpServer,
  serveMcpHttp,
  serveMcpStdio,
  specToMcpTool,
  hasSideEffects,
  type McpServeOptions,
  type McpHttpOptions,
} from './interop/mcp-serve.js';
export {
  serveA2a,
  agentCard,
  RunExecutor,
  type A2aServeOptions,
  type A2aHttpOptions,
} from './interop/a2a-serve.js';
export { BoundedTaskStore, DEFAULT_MAX_TASKS } from './interop/a2a-task-store.js';
export {
  startGateway,
  NatsRunSource,
  IndexRunSource,
  loadApiKeys,
  type Gateway,
  type GatewayOptions,
  type RunSource,
} from './gateway/index.js';
