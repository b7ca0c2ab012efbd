import { ACTOR_FLAGS, type CommandSpec } from '../args.js';

export const mcpSpec: CommandSpec = {
  name: 'mcp',
  usage: 'agentmesh mcp serve [--http PORT] [flags] | agentmesh mcp list',
  summary:
    'serve: the catalog as an MCP server (stdio, or streamable HTTP at /mcp with --http; embedded, or the fleet with --nats). Over HTTP every request needs the bearer token, a Host naming the bound address, and tools with side effects are offered only when --allow-tools names them. list: the configured MCP servers, their state and tool count.',
  flags: {
    nats: ACTOR_FLAGS['nats']!,
    prefix: ACTOR_FLAGS['prefix']!,
    config: ACTOR_FLAGS['config']!,
    http: { type: 'string', description: 'serve: streamable HTTP on this port instead of stdio' },
    host: {
      type: 'string',
      description:
        'serve: address to listen on with --http (default 127.0.0.1); requests must name it or a loopback name as Host',
    },
    token: {
      type: 'string',
      description:
        'serve --http: the bearer token clients send (at least 32 characters; default: a new one, printed)',
      env: 'AGENTMESH_MCP_TOKEN',
    },
    'allow-tools': {
      type: 'string',
      description:
        'serve --http: tools with side effects (writes, commands, not read-only) offered over HTTP: names, namespaces or globs (default none)',
    },
    tools: { type: 'string', description: 'serve: allow-list of tool names, namespaces or globs' },
    deferred: { type: 'string', description: 'serve: names or globs reached only through tool_search' },
    workspace: {
      type: 'string',
      description: 'serve (embedded): enables the workspace tool pack',
      env: 'AGENTMESH_WORKSPACE',
    },
    json: { type: 'boolean', description: 'list: print JSON' },
  },
};
