import { CONNECTION_FLAGS, type CommandSpec } from '../args.js';

export const consoleSpec: CommandSpec = {
  name: 'console',
  usage: 'agentmesh console [--port P] [--nats URL] [flags]',
  summary:
    'Serves the web console: live runs and their events, tools, the fleet, a form to submit runs, and approve/deny for calls that wait on approval. Embedded (catalog, planner and workers in this process) unless --nats is given. Open the URL it prints: it carries the per-launch access token; requests with another Host or Origin are refused.',
  flags: {
    ...CONNECTION_FLAGS,
    port: {
      type: 'string',
      description: 'HTTP port (default 7070; 0 picks a free one)',
      env: 'AGENTMESH_CONSOLE_PORT',
    },
    host: {
      type: 'string',
      description:
        'address to listen on (default 127.0.0.1); requests must name it, 127.0.0.1 or localhost as Host',
    },
    tools: { type: 'string', description: 'embedded: packs and/or tool names the local worker serves' },
    workspace: {
      type: 'string',
      description: 'embedded: workspace folder for the workspace pack',
      env: 'AGENTMESH_WORKSPACE',
    },
    script: {
      type: 'string',
      description: 'embedded: default script for the scripted provider (no API key needed)',
    },
  },
};
