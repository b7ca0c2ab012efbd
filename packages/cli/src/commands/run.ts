import { randomUUID } from 'node:crypto';
import {
  AgentMeshError,
  ErrorCode,
  RunRequestSchema,
  publishJson,
  subjects,
  validate,
  type RunEvent,
  type RunRequestInput,
} from '@agentmesh/protocol';
import { checkProviderConfig, followRun, readScriptFile, submitRun } from '@agentmesh/planner';
import { plannerOptions } from '../planner-options.js';
import { ACTOR_FLAGS, intFlag, listFlag, stringFlag, type CommandSpec } from '../args.js';
import { connectNats, type CommandContext } from '../context.js';
import { startEmbedded } from '../embedded.js';
import { createHumanRenderer } from '../render.js';

export const runSpec: CommandSpec = {
  name: 'run',
  usage: 'agentmesh run [flags] "TASK"',
  summary:
    'Runs one agent task. Without --nats it runs embedded: catalog, planner and workers in this process. With --nats it submits the run to the fleet and follows its events.',
  flags: {
    nats: ACTOR_FLAGS['nats']!,
    prefix: ACTOR_FLAGS['prefix']!,
    config: ACTOR_FLAGS['config']!,
    provider: {
      type: 'string',
      description:
        'openai | openai-responses | anthropic | openai-compatible | scripted, or a preset: openrouter | ollama | vllm | lmstudio | groq | together | deepseek | huggingface',
    },
    model: { type: 'string', description: 'model name, or an alias from models: in the configuration' },
    'tool-protocol': {
      type: 'string',
      description: 'native | text (tools in the prompt, for models without tool calling)',
    },
    'base-url': {
      type: 'string',
      description: 'base URL of an OpenAI-compatible server (Ollama, vLLM, OpenRouter)',
    },
    tools: { type: 'string', description: 'allow-list of tool names or namespaces, comma-separated' },
    workspace: {
      type: 'string',
      description: 'workspace folder: enables the workspace tool pack',
      env: 'AGENTMESH_WORKSPACE',
    },
    'max-iterations': { type: 'string', description: 'model turns at most (default 12)' },
    'tool-search': { type: 'string', description: 'off | bm25 | regex | hybrid' },
    script: {
      type: 'string',
      description: 'scripted provider: a JSON file of model turns (no API key needed)',
    },
    deferred: { type: 'string', description: 'names or globs made deferred for this run, comma-separated' },
    system: { type: 'string', description: 'system prompt' },
    id: { type: 'string', description: 'run id (default: generated)' },
    json: { type: 'boolean', description: 'events as JSON lines on stdout, run.completed last' },
    yes: { type: 'boolean', short: 'y', description: 'do not ask before tools that write' },
  },
};

/** Builds the RunRequest from flags and configuration. */
export function buildRunRequest(ctx: CommandContext): RunRequestInput {
  const { args, config } = ctx;
  const task = args.positionals.join(' ').trim();
  if (task === '')
    throw new AgentMeshError(ErrorCode.InvalidRequest, 'run needs a task: agentmesh run "TASK"', {
      details: { usage: true },
    });
  const scriptPath = stringFlag(args, 'script');
  const baseUrl = stringFlag(args, 'base-url') ?? config.provider?.base_url;
  let provider =
    stringFlag(args, 'provider') ?? (scriptPath ? 'scripted' : undefined) ?? config.provider?.name;
  if (provider === undefined && baseUrl !== undefined) provider = 'openai-compatible';
  const maxIterations = intFlag(args, 'max-iterations');
  const limits = {
    ...config.limits,
    ...(maxIterations === undefined ? {} : { max_iterations: maxIterations }),
  };
  const deferred = [...(config.tools?.deferred ?? []), ...(listFlag(args, 'deferred') ?? [])];
  const request: RunRequestInput = {
    id: stringFlag(args, 'id') ?? `run-${randomUUID().slice(0, 8)}`,
    task,
    ...((stringFlag(args, 'system') ?? config.provider?.system)
      ? { system: stringFlag(args, 'system') ?? config.provider?.system }
      : {}),
    ...(provider ? { provider: provider as RunRequestInput['provider'] } : {}),
    ...((stringFlag(args, 'model') ?? config.provider?.model)
      ? { model: stringFlag(args, 'model') ?? config.provider?.model }
      : {}),
    ...((listFlag(args, 'tools') ?? config.tools?.allow)
      ? { tools: listFlag(args, 'tools') ?? config.tools?.allow }
      : {}),
    ...((stringFlag(args, 'tool-search') ?? config.tools?.search?.strategy)
      ? {
          tool_search: (stringFlag(args, 'tool-search') ??
            config.tools?.search?.strategy) as RunRequestInput['tool_search'],
        }
      : {}),
    ...(deferred.length > 0 ? { deferred } : {}),
    ...(config.tools?.always ? { always: config.tools.always } : {}),
    ...(Object.keys(limits).length > 0 ? { limits } : {}),
    ...(scriptPath ? { script: readScriptFile(scriptPath) } : {}),
    ...(stringFlag(args, 'tool-protocol')
      ? { tool_protocol: stringFlag(args, 'tool-protocol') as RunRequestInput['tool_protocol'] }
      : {}),
  };
  validate(RunRequestSchema, request, 'run request', ErrorCode.InvalidRequest);
  return request;
}

export async function runCommand(ctx: CommandContext): Promise<number> {
  const request = buildRunRequest(ctx);
  const json = ctx.args.values['json'] === true;
  const render = json
    ? (e: RunEvent) => ctx.io.stdout.write(`${JSON.stringify(e)}\n`)
    : createHumanRenderer(ctx.io.stdout, { color: Boolean(ctx.io.stdout.isTTY) && !process.env['NO_COLOR'] });
  const final =
    ctx.natsUrl === undefined
      ? await runEmbedded(ctx, request, render)
      : await runOverNats(ctx, request, render);
  return final.type === 'run.completed' && final.status === 'done' ? 0 : 1;
}

async function runEmbedded(
  ctx: CommandContext,
  request: RunRequestInput,
  render: (e: RunEvent) => void,
): Promise<RunEvent> {
  const baseUrl = stringFlag(ctx.args, 'base-url') ?? ctx.config.provider?.base_url;
  checkProviderConfig(plannerOptions(ctx.config, baseUrl).providers, request);
  const interactive =
    Boolean(ctx.io.stdin.isTTY) && Boolean(ctx.io.stdout.isTTY) && ctx.args.values['yes'] !== true;
  const mesh = await startEmbedded({
    config: ctx.config,
    logger: ctx.logger,
    workspace: stringFlag(ctx.args, 'workspace', 'AGENTMESH_WORKSPACE'),
    baseUrl,
    io: ctx.io,
    askBeforeWrites: interactive,
  });
  const controller = new AbortController();
  const onSignal = () => controller.abort(new Error('interrupted'));
  process.once('SIGINT', onSignal);
  try {
    return await mesh.planner.execute(request, { signal: controller.signal, onEvent: render });
  } finally {
    process.off('SIGINT', onSignal);
    await mesh.stop();
  }
}

async function runOverNats(
  ctx: CommandContext,
  request: RunRequestInput,
  render: (e: RunEvent) => void,
): Promise<RunEvent> {
  const bus = await connectNats(ctx, 'agentmesh-cli');
  const s = subjects(ctx.prefix);
  try {
    const { run_id: runId, duplicate } = await submitRun(bus, request, { prefix: ctx.prefix });
    if (duplicate) ctx.io.stderr.write(`run ${runId} was submitted before: following its events\n`);
    let accepted = false;
    const waiting = setTimeout(() => {
      if (!accepted) ctx.io.stderr.write(`waiting for a planner to take run ${runId}...\n`);
    }, 5000);
    const onSignal = () => {
      ctx.io.stderr.write(`cancelling run ${runId}...\n`);
      publishJson(bus, s.runCancel(runId), { reason: 'interrupted from the command line' });
    };
    process.on('SIGINT', onSignal);
    try {
      return await followRun(bus, runId, {
        prefix: ctx.prefix,
        onEvent: (event) => {
          accepted = true;
          render(event);
        },
      });
    } finally {
      clearTimeout(waiting);
      process.off('SIGINT', onSignal);
    }
  } finally {
    await bus.close();
  }
}
