import { CONNECTION_FLAGS, type CommandSpec } from '../args.js';

export const sessionsSpec: CommandSpec = {
  name: 'sessions',
  usage:
    'agentmesh sessions list | agentmesh sessions show ID | agentmesh sessions fork ID NEW_ID | agentmesh sessions delete ID',
  summary:
    'Lists the conversations (sessions) of a tenant, shows one transcript, forks one under a new id, or deletes one: on NATS with --nats, else those of embedded runs in the data dir.',
  flags: {
    ...CONNECTION_FLAGS,
    tenant: {
      type: 'string',
      value: 'TENANT',
      description:
        'the tenant whose sessions these are (default "default"); on NATS through its tenant API (a tenant\'s NATS user needs it)',
      env: 'AGENTMESH_TENANT',
    },
    'data-dir': {
      type: 'string',
      value: 'DIR',
      description: 'without --nats: the data dir of embedded runs (default .agentmesh in the current folder)',
      env: 'AGENTMESH_DATA_DIR',
    },
    json: { type: 'boolean', description: 'print JSON' },
  },
  verbs: ['list', 'show', 'fork', 'delete'],
};
