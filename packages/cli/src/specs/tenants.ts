import type { CommandSpec } from '../args.js';

/** `agentmesh tenants`: the tenants of a shared fleet (docs/tenancy.md). */
export const tenantsSpec: CommandSpec = {
  name: 'tenants',
  usage: 'agentmesh tenants add NAME [--prefix P] [--password-env VAR]',
  summary:
    "Prints the NATS user of a tenant for nats.conf's authorization.users (allowed only on its own tenant API, agentmesh.tenant.NAME.…) and how its clients connect.",
  flags: {
    prefix: {
      type: 'string',
      value: 'PREFIX',
      description: 'subject prefix (default agentmesh)',
      env: 'AGENTMESH_PREFIX',
    },
    'password-env': {
      type: 'string',
      value: 'VAR',
      description:
        'add: nats-server reads the password from this environment variable (default: a new strong password is printed)',
    },
    json: { type: 'boolean', description: 'print JSON' },
  },
  verbs: ['add'],
};
