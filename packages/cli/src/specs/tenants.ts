import { CONNECTION_FLAGS, type CommandSpec } from '../args.js';

/** `agentmesh tenants`: the tenants of a shared fleet (docs/tenancy.md). */
export const tenantsSpec: CommandSpec = {
  name: 'tenants',
  usage:
    'agentmesh tenants add NAME [--prefix P] [--password-env VAR] | agentmesh tenants usage [NAME] [--json]',
  summary:
    "add: prints the NATS user of a tenant for nats.conf's authorization.users (allowed only on its own tenant API, agentmesh.tenant.NAME.…) and how its clients connect. " +
    "usage: shows each tenant's usage today (UTC) against its limits (tenants: in the configuration): tokens and spend against daily_tokens and daily_cost_usd, submissions this minute against runs_per_minute; on NATS with --nats (every planner's usage), else that of embedded runs in the data dir.",
  flags: {
    ...CONNECTION_FLAGS,
    'password-env': {
      type: 'string',
      value: 'VAR',
      description:
        'add: nats-server reads the password from this environment variable (default: a new strong password is printed)',
    },
    'data-dir': {
      type: 'string',
      value: 'DIR',
      description:
        'usage without --nats: the data dir of embedded runs (default .agentmesh in the current folder)',
      env: 'AGENTMESH_DATA_DIR',
    },
    json: { type: 'boolean', description: 'print JSON' },
  },
  verbs: ['add', 'usage'],
};
