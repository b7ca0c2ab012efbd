import { AgentMeshError, ErrorCode, type RunRequestInput } from '@agentmesh/protocol';
import { readScriptFile } from '@agentmesh/planner';
import { intFlag, listFlag, stringFlag } from '../args.js';
import type { CommandContext } from '../context.js';
import { meshBus } from './mcp-command.js';
import { accessToken } from '../http-access.js';
import { serveA2a } from './a2a-serve.js';
import { a2aSpec } from '../specs/a2a.js';

/** The part of every RunRequest that comes from flags and configuration; the A2A message adds the task. */
function baseRequest(ctx: CommandContext): Omit<RunRequestInput, 'task' | 'id'> {
  const script = stringFlag(ctx.args, 'script');
  const provider =
    stringFlag(ctx.args, 'provider') ?? (script ? 'scripted' : undefined) ?? ctx.config.provider?.name;
  const model = stringFlag(ctx.args, 'model') ?? ctx.config.provider?.model;
  const tools = listFlag(ctx.args, 'tools') ?? ctx.config.tools?.allow;
  const deferred = listFlag(ctx.args, 'deferred');
  return {
    ...(provider ? { provider: provider as RunRequestInput['provider'] } : {}),
    ...(model ? { model } : {}),
    ...(tools ? { tools } : {}),
    ...(deferred ? { deferred } : {}),
    ...(script ? { script: readScriptFile(script) } : {}),
  };
}

export async function a2aCommand(ctx: CommandContext): Promise<number> {
  const [verb] = ctx.args.positionals;
  const port = intFlag(ctx.args, 'port');
  if (verb !== 'serve' || port === undefined) {
    ctx.io.stderr.write(`usage: ${a2aSpec.usage}\n`);
    return 2;
  }
  const host = stringFlag(ctx.args, 'host') ?? '127.0.0.1';
  const request = baseRequest(ctx);
  const { token, generated } = accessToken(
    stringFlag(ctx.args, 'token', 'AGENTMESH_A2A_TOKEN'),
    '--token (AGENTMESH_A2A_TOKEN)',
  );
  const maxTasks = intFlag(ctx.args, 'max-tasks');
  if (maxTasks === 0)
    throw new AgentMeshError(ErrorCode.InvalidRequest, '--max-tasks must be at least 1, got 0', {
      details: { usage: true },
    });
  const mesh = await meshBus(ctx, 'agentmesh-a2a');
  try {
    const http = await serveA2a({
      bus: mesh.bus,
      prefix: ctx.prefix,
      logger: ctx.logger,
      port,
      host,
      publicUrl: stringFlag(ctx.args, 'public-url') ?? `http://${host}:${port}`,
      baseRequest: request,
      token,
      ...(maxTasks === undefined ? {} : { maxTasks }),
    });
    ctx.io.stderr.write(`agentmesh A2A agent at http://${host}:${port}/.well-known/agent-card.json\n`);
    if (generated) ctx.io.stderr.write(`bearer token (new at each start): ${token}\n`);
    await new Promise<void>((resolve) => {
      process.once('SIGTERM', () => resolve());
      process.once('SIGINT', () => resolve());
    });
    await new Promise((resolve) => http.close(resolve));
    return 0;
  } finally {
    await mesh.stop();
  }
}
