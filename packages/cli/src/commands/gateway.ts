import { intFlag, listFlag, stringFlag } from '../args.js';
import type { CommandContext } from '../context.js';

/** Runs the gateway until SIGTERM/SIGINT (the server itself is loaded only when this command runs). */
export async function gatewayCommand(ctx: CommandContext): Promise<number> {
  const { runGateway } = await import('../gateway/command.js');
  return runGateway(ctx, {
    port: intFlag(ctx.args, 'port', 'AGENTMESH_GATEWAY_PORT') ?? 8080,
    host: stringFlag(ctx.args, 'host'),
    tools: listFlag(ctx.args, 'tools'),
    workspace: stringFlag(ctx.args, 'workspace', 'AGENTMESH_WORKSPACE'),
    script: stringFlag(ctx.args, 'script'),
  });
}
