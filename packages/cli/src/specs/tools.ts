import { CONNECTION_FLAGS, TENANT_FLAG, type CommandSpec } from '../args.js';

export const toolsSpec: CommandSpec = {
  name: 'tools',
  usage: 'agentmesh tools list [--namespace NS] | agentmesh tools search "QUERY" [flags]',
  summary:
    "Lists or searches the tools the catalog knows. With --nats it asks the fleet's catalog; without, the tools this machine would serve embedded.",
  flags: {
    ...CONNECTION_FLAGS,
    ...TENANT_FLAG,
    namespace: { type: 'string', value: 'NS', description: 'list: only this namespace' },
    loading: { type: 'string', value: 'LOADING', description: 'list: always | deferred' },
    strategy: {
      type: 'string',
      value: 'STRATEGY',
      description: 'search: bm25 | regex | hybrid (default bm25)',
    },
    limit: { type: 'string', value: 'N', description: 'search: results at most (default 10, max 50)' },
    workspace: {
      type: 'string',
      value: 'DIR',
      description: 'embedded: include the workspace pack',
      env: 'AGENTMESH_WORKSPACE',
    },
    json: { type: 'boolean', description: 'print JSON' },
  },
  verbs: ['list', 'search'],
};
