import { CONNECTION_FLAGS, type CommandSpec } from '../args.js';

/** `agentmesh tenants usage`: self-contained, so it merges into the `tenants` group beside `tenants add`. */
export const tenantsUsageSpec: CommandSpec = {
  name: 'tenants',
  usage: 'agentmesh tenants usage [NAME] [--json]',
  summary:
    "Shows each tenant's usage today (UTC) against its limits (tenants: in the configuration): tokens and spend against daily_tokens and daily_cost_usd, submissions this minute against runs_per_minute. On NATS with --nats (every planner's usage), else that of embedded runs in the data dir.",
  flags: {
    ...CONNECTION_FLAGS,
    'data-dir': {
      type: 'string',
      value: 'DIR',
      description: 'without --nats: the data dir of embedded runs (default .agentmesh in the current folder)',
      env: 'AGENTMESH_DATA_DIR',
    },
    json: { type: 'boolean', description: 'print JSON' },
  },
  verbs: ['usage'],
};
