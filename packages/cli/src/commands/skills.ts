import { usageError } from '../args.js';
import type { CommandContext } from '../context.js';
import { plural } from '../render.js';
import { configuredSkills } from '../skills.js';
import { formatTable } from '../table.js';
import { skillsSpec } from '../specs/skills.js';

export function skillsCommand(ctx: CommandContext): Promise<number> {
  const verb = ctx.args.positionals[0] ?? 'list';
  if (verb !== 'list' || ctx.args.positionals.length > 1)
    throw usageError(skillsSpec, `unknown skills command: ${ctx.args.positionals.join(' ')}`);
  const skills = configuredSkills(ctx.config);
  if (ctx.args.values['json'] === true) {
    ctx.io.stdout.write(JSON.stringify(skills, null, 2) + '\n');
    return Promise.resolve(0);
  }
  if (skills.length === 0) {
    ctx.io.stdout.write(
      'no skills configured: add a `skills:` list or `skills: {dirs: [...]}` to agentmesh.yaml\n',
    );
    return Promise.resolve(0);
  }
  const rows = skills.map((s) => [
    s.name,
    s.disable_model_invocation ? 'on request' : 'matched',
    s.allowed_tools === undefined
      ? 'all'
      : [...s.allowed_tools, ...s.mcp.map((m) => `mcp.${m}.*`)].join(', '),
    s.description,
  ]);
  ctx.io.stdout.write(formatTable(['NAME', 'ACTIVATION', 'TOOLS', 'DESCRIPTION'], rows) + '\n');
  ctx.io.stdout.write(`${plural(skills.length, 'skill')}\n`);
  return Promise.resolve(0);
}
