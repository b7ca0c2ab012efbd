import type { CommandSpec } from '../args.js';
import { usageError } from '../args.js';
import { completionSpec } from '../specs/completion.js';
import type { CommandContext } from '../context.js';

function words(spec: CommandSpec): string {
  return [...(spec.verbs ?? []), ...Object.keys(spec.flags).map((f) => `--${f}`), '--help'].join(' ');
}

/** A bash completion function for `agentmesh` built from the command specs; zsh loads it through bashcompinit. */
export function bashCompletion(specs: readonly CommandSpec[]): string {
  const cases = specs.map((s) => `    ${s.name}) words="${words(s)}" ;;`).join('\n');
  return `# agentmesh completion for bash (agentmesh completion bash)
_agentmesh() {
  local cur="\${COMP_WORDS[COMP_CWORD]}"
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "${specs.map((s) => s.name).join(' ')} help --help --version" -- "$cur"))
    return 0
  fi
  local words=""
  case "\${COMP_WORDS[1]}" in
${cases}
    help) words="${specs.map((s) => s.name).join(' ')}" ;;
  esac
  case "\${COMP_WORDS[COMP_CWORD-1]}" in
    --script|--config|--workspace) COMPREPLY=($(compgen -f -- "$cur")); return 0 ;;
  esac
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o default -F _agentmesh agentmesh
`;
}

export function zshCompletion(specs: readonly CommandSpec[]): string {
  return `# agentmesh completion for zsh (agentmesh completion zsh)
autoload -U +X compinit && compinit
autoload -U +X bashcompinit && bashcompinit
${bashCompletion(specs)}`;
}

export function completionCommand(ctx: CommandContext, specs: readonly CommandSpec[]): Promise<number> {
  const [shell, ...extra] = ctx.args.positionals;
  if ((shell !== 'bash' && shell !== 'zsh') || extra.length > 0)
    throw usageError(
      completionSpec,
      `completion needs a shell: bash or zsh${shell ? `, not "${shell}"` : ''}`,
    );
  ctx.io.stdout.write(shell === 'bash' ? bashCompletion(specs) : zshCompletion(specs));
  return Promise.resolve(0);
}
