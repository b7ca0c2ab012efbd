import { CONNECTION_FLAGS, type CommandSpec } from '../args.js';

export const statusSpec: CommandSpec = {
  name: 'status',
  usage: 'agentmesh status [flags]',
  summary:
    'Shows the fleet on NATS. Live actors (workers with id, host, pid, tools, calls in flight, uptime, version; planners with runs in flight), the tools the catalog knows, and the run queue. Exit 0 also for an empty fleet; 1 when NATS cannot be reached.',
  flags: { ...CONNECTION_FLAGS, json: { type: 'boolean', description: 'print JSON' } },
};
