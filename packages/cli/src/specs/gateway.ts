import { CONNECTION_FLAGS, type CommandSpec } from '../args.js';

export const gatewaySpec: CommandSpec = {
  name: 'gateway',
  usage: 'agentmesh gateway --port P [--nats URL] [--config FILE] [flags]',
  summary:
    'Serves the HTTP API for product UIs (docs/gateway.md): submit runs, stream their events as resumable Server-Sent Events (agentmesh, AG-UI or AI SDK format), approve, input, pause, resume, cancel, list runs and tools, /openapi.json. Stateless in front of a NATS fleet; embedded (catalog, planner and workers in this process) without --nats. API keys map to tenants (gateway.api_keys, api_keys_file, AGENTMESH_GATEWAY_KEYS); without keys access is open as tenant "default".',
  flags: {
    ...CONNECTION_FLAGS,
    port: {
      type: 'string',
      description: 'HTTP port (default 8080; 0 picks a free one)',
      env: 'AGENTMESH_GATEWAY_PORT',
    },
    host: {
      type: 'string',
      description: 'address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)',
    },
    tools: { type: 'string', description: 'embedded: packs and/or tool names the local worker serves' },
    workspace: {
      type: 'string',
      description: 'embedded: workspace folder for the workspace pack',
      env: 'AGENTMESH_WORKSPACE',
    },
    script: {
      type: 'string',
      description:
        'default script for the scripted provider, for runs that name no provider (no API key needed)',
    },
  },
};
