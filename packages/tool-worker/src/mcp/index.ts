export {
  McpConfigSchema,
  McpServerConfigSchema,
  McpToolPolicySchema,
  parseMcpConfig,
  substituteEnv,
  isMcpToolSelected,
  mcpToolPolicy,
  type McpConfig,
  type McpServerConfig,
  type McpToolPolicy,
} from './config.js';
export {
  McpConnection,
  type McpConnectionOptions,
  type McpServerState,
  type McpToolInfo,
} from './connection.js';
export { mcpTool, mcpToolName, type McpToolOptions } from './tools.js';
export {
  McpToolSource,
  type McpServerStatus,
  type McpToolSourceOptions,
  type McpToolsChange,
  type McpToolsTarget,
} from './source.js';
