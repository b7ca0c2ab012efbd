import { ACTOR_FLAGS, type CommandSpec } from '../args.js';

export const catalogSpec: CommandSpec = {
  name: 'catalog',
  usage: 'agentmesh catalog [flags]',
  summary: 'Runs the catalog actor against NATS: tool registration, liveness, exposure and search.',
  flags: {
    ...ACTOR_FLAGS,
    'worker-ttl-ms': {
      type: 'string',
      value: 'MS',
      description: 'forget a worker after this long without a heartbeat (default 10000)',
    },
    roles: {
      type: 'string',
      value: 'ROLES',
      description:
        'worker roles and the tool namespaces each may register, e.g. "worker=*;worker_math=math" (catalog.roles)',
      env: 'AGENTMESH_CATALOG_ROLES',
    },
  },
};

export const plannerSpec: CommandSpec = {
  name: 'planner',
  usage: 'agentmesh planner [flags]',
  summary:
    'Runs a planner actor against NATS: takes runs from the AGENTMESH_RUNS stream and runs the agent loop.',
  flags: {
    ...ACTOR_FLAGS,
    'max-runs': {
      type: 'string',
      value: 'N',
      description: 'runs handled at once by this planner (default 256)',
    },
    'base-url': {
      type: 'string',
      value: 'URL',
      description: 'base URL of an OpenAI-compatible server',
      env: 'OPENAI_BASE_URL',
    },
    'drain-timeout': {
      type: 'string',
      value: 'DURATION',
      description:
        'on SIGTERM, hand every run to other planners within this long (default 30s; e.g. 500ms, 2m)',
      env: 'AGENTMESH_DRAIN_TIMEOUT',
    },
    'version-tag': {
      type: 'string',
      value: 'TAG',
      description: 'the build shown by "agentmesh status" (default: the planner package version)',
      env: 'AGENTMESH_VERSION_TAG',
    },
  },
};

export const workerSpec: CommandSpec = {
  name: 'worker',
  usage: 'agentmesh worker [flags]',
  summary:
    'Runs a tool-worker actor against NATS: serves its tools in queue groups shared with other replicas.',
  flags: {
    ...ACTOR_FLAGS,
    tools: {
      type: 'string',
      value: 'LIST',
      description: 'packs (builtin, workspace) and/or tool names, namespaces or globs',
    },
    workspace: {
      type: 'string',
      value: 'DIR',
      description: 'workspace folder for the workspace pack',
      env: 'AGENTMESH_WORKSPACE',
    },
    threads: {
      type: 'string',
      value: 'N',
      description: 'piscina threads for CPU-bound tools (default: cores)',
    },
    concurrency: {
      type: 'string',
      value: 'N',
      description: 'calls in flight at most before answering busy (default 64)',
    },
    mcp: {
      type: 'string',
      description: 'also serve the tools of these configured MCP servers (mcp.servers)',
    },
    role: {
      type: 'string',
      value: 'ROLE',
      description: 'register as this role (its NATS user) on catalog.register.<ROLE>',
      env: 'AGENTMESH_WORKER_ROLE',
    },
    artifacts: {
      type: 'string',
      value: 'MODE',
      description:
        'shared (default) or off: keep no artifacts, serve no fetches (a user without the artifacts grant)',
      env: 'AGENTMESH_WORKER_ARTIFACTS',
    },
  },
};
