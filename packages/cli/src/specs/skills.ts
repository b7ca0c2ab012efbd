import { CONNECTION_FLAGS, type CommandSpec } from '../args.js';

export const skillsSpec: CommandSpec = {
  name: 'skills',
  usage: 'agentmesh skills list [--config FILE] [--json]',
  summary:
    'Lists the skills of the configuration (the `skills:` list and the files of `skills.dirs`): name, what activates it, its tools and description.',
  flags: { config: CONNECTION_FLAGS['config']!, json: { type: 'boolean', description: 'print JSON' } },
  verbs: ['list'],
};
