import { AgentMeshError, ErrorCode, type RunRequestInput } from '@agentmesh/protocol';
import { readScriptFile } from '@agentmesh/planner';
import { ACTOR_FLAGS, intFlag, listFlag, stringFlag, type CommandSpec } from '../args.js';
import type { CommandContext } from '../context.js';
import { meshBus } from './mcp-command.js';
import { accessToken } from '../http-access.js';
import { serveA2a } from './a2a-serve.js';

export const a2aSpec: CommandSpec = {
  name: 'a2a',
  usage: 'agentmesh a2a serve --port P [flags]',
  summary:
    'Serves agentmesh runs as an A2A agent: the agent card at /.well-known/agent-card.json, JSON-RPC at /a2a (embedded, or the fleet with --nats). Every /a2a request needs the bearer token (--token, or the one printed at start).',
  flags: {
    nats: ACTOR_FLAGS['nats']!,
    prefix: ACTOR_FLAGS['prefix']!,
    config: ACTOR_FLAGS['config']!,
    port: { type: 'string', description: 'HTTP port (required)' },
    host: { type: 'string', description: 'address to listen on (default 127.0.0.1)' },
    'public-url': { type: 'string', description: 'base URL the agent card names (default http://HOST:PORT)' },
    provider: { type: 'string', description: 'openai | anthropic | openai-compatible | scripted' },
    model: { type: 'string', description: 'model name' },
    tools: { type: 'string', description: 'allow-list of tool names, namespaces or globs for every run' },
    deferred: { type: 'string', description: 'names or globs made deferred for every run' },
    script: { type: 'string', description: 'scripted provider: a JSON file of model turns (demos, tests)' },
    token: {
      type: 'string',
      description:
        'the bearer token clients send to /a2a (at least 32 characters; default: a new one, printed)',
      env: 'AGENTMESH_A2A_TOKEN',
    },
    'max-tasks': {
      type: 'string',
      description:
        'tasks kept for tasks/get (default 1000); past it the oldest finished task is dropped first',
    },
    workspace: {
      type: 'string',
      description: 'embedded: enables the workspace tool pack',
      env: 'AGENTMESH_WORKSPACE',
    },
  },
};

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
