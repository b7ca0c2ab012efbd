import type { CommandSpec } from '../args.js';

export const completionSpec: CommandSpec = {
  name: 'completion',
  usage: 'agentmesh completion bash|zsh',
  summary:
    'Prints a shell completion script for commands, subcommands and flags. bash: `source <(agentmesh completion bash)` (or save it in /etc/bash_completion.d/agentmesh); zsh: `source <(agentmesh completion zsh)` in ~/.zshrc.',
  flags: {},
  verbs: ['bash', 'zsh'],
};
