import { ACTOR_FLAGS, type CommandSpec } from '../args.js';

export const a2aSpec: CommandSpec = {
  name: 'a2a',
  usage: 'agentmesh a2a serve --port P [flags]',
  summary:
    'Serves agentmesh runs as an A2A agent: the agent card at /.well-known/agent-card.json, JSON-RPC at /a2a (embedded, or the fleet with --nats). Every /a2a request needs the bearer token (--token, or the one printed at start).',
  flags: {
    nats: ACTOR_FLAGS['nats']!,
    prefix: ACTOR_FLAGS['prefix']!,
    config: ACTOR_FLAGS['config']!,
    port: { type: 'string', description: 'HTTP port (required)' },
    host: { type: 'string', description: 'address to listen on (default 127.0.0.1)' },
    'public-url': { type: 'string', description: 'base URL the agent card names (default http://HOST:PORT)' },
    provider: { type: 'string', description: 'openai | anthropic | openai-compatible | scripted' },
    model: { type: 'string', description: 'model name' },
    tools: { type: 'string', description: 'allow-list of tool names, namespaces or globs for every run' },
    deferred: { type: 'string', description: 'names or globs made deferred for every run' },
    script: { type: 'string', description: 'scripted provider: a JSON file of model turns (demos, tests)' },
    token: {
      type: 'string',
      description:
        'the bearer token clients send to /a2a (at least 32 characters; default: a new one, printed)',
      env: 'AGENTMESH_A2A_TOKEN',
    },
    'max-tasks': {
      type: 'string',
      description:
        'tasks kept for tasks/get (default 1000); past it the oldest finished task is dropped first',
    },
    workspace: {
      type: 'string',
      description: 'embedded: enables the workspace tool pack',
      env: 'AGENTMESH_WORKSPACE',
    },
  },
};
