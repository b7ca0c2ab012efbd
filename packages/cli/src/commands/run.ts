import { randomUUID } from 'node:crypto';
import {
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
import {
  ACTOR_FLAGS,
  checkModeFlags,
  intFlag,
  listFlag,
  stringFlag,
  usageError,
  type CommandSpec,
} from '../args.js';
import { connectNats, type CommandContext } from '../context.js';
import { startEmbedded } from '../embedded.js';
import { createHumanRenderer, runWarning } from '../render.js';
import { resolveToolEntries } from '../tools.js';
import { checkFleetTools, checkRunStream, expandPacks } from './run-nats.js';

const EMBEDDED_ONLY = (otherwise: string) => ({ mode: 'embedded' as const, otherwise });

export const runSpec: CommandSpec = {
  name: 'run',
  usage: 'agentmesh run [flags] "TASK"   (TASK "-" reads the task from stdin)',
  summary:
    'Runs one agent task. Without --nats it runs embedded: catalog, planner and workers in this process. With --nats it submits the run to the fleet and follows its events.',
  flags: {
    nats: ACTOR_FLAGS['nats']!,
    prefix: ACTOR_FLAGS['prefix']!,
    config: ACTOR_FLAGS['config']!,
    provider: {
      type: 'string',
      value: 'NAME',
      description: 'openai | anthropic | openai-compatible | scripted',
    },
    model: { type: 'string', value: 'MODEL', description: 'model name' },
    'base-url': {
      type: 'string',
      value: 'URL',
      description: 'base URL of an OpenAI-compatible server (Ollama, vLLM, OpenRouter)',
    },
    tools: {
      type: 'string',
      value: 'LIST',
      description: 'allow-list: packs (builtin, workspace), tool names, namespaces or globs, comma-separated',
    },
    workspace: {
      type: 'string',
      value: 'DIR',
      description: 'workspace folder: enables the workspace tool pack',
      env: 'AGENTMESH_WORKSPACE',
      only: EMBEDDED_ONLY('the workers of the fleet: agentmesh worker --workspace DIR'),
    },
    'max-iterations': { type: 'string', value: 'N', description: 'model turns at most (default 12)' },
    'tool-search': { type: 'string', value: 'STRATEGY', description: 'off | bm25 | regex | hybrid' },
    script: {
      type: 'string',
      value: 'FILE',
      description: 'scripted provider: a JSON file of model turns (no API key needed)',
    },
    deferred: {
      type: 'string',
      value: 'GLOBS',
      description: 'names or globs made deferred for this run, comma-separated',
    },
    system: { type: 'string', value: 'TEXT', description: 'system prompt' },
    daemon: {
      type: 'boolean',
      description:
        'run as a daemon: idle after each answer and wake on triggers (agentmesh runs trigger) until cancelled',
    },
    skill: {
      type: 'string',
      value: 'NAMES',
      description:
        'activate these skills from the first turn (comma-separated); "none" turns skill matching off',
    },
    id: { type: 'string', value: 'ID', description: 'run id (default: generated)' },
    json: { type: 'boolean', description: 'events as JSON lines on stdout, run.completed last' },
    yes: {
      type: 'boolean',
      short: 'y',
      description: 'do not ask before tools that write',
      only: EMBEDDED_ONLY('embedded runs; on NATS the workers decide (approvals)'),
    },
  },
};

/** The task: the positional words, or stdin when the task is `-`. */
async function readTask(ctx: CommandContext): Promise<string> {
  const words = ctx.args.positionals;
  if (words.length === 1 && words[0] === '-') {
    const chunks: Buffer[] = [];
    for await (const chunk of ctx.io.stdin) chunks.push(Buffer.from(chunk as Buffer));
    return Buffer.concat(chunks).toString('utf8').trim();
  }
  return words.join(' ').trim();
}

/** Builds the RunRequest from the task, flags and configuration. */
export function buildRunRequest(ctx: CommandContext, task: string): RunRequestInput {
  const { args, config } = ctx;
  if (task === '')
    throw usageError(runSpec, 'run needs a task: agentmesh run "TASK" (or "-" to read it from stdin)');
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
  const system = stringFlag(args, 'system') ?? config.provider?.system;
  const model = stringFlag(args, 'model') ?? config.provider?.model;
  const tools = listFlag(args, 'tools') ?? config.tools?.allow;
  const toolSearch = stringFlag(args, 'tool-search') ?? config.tools?.search?.strategy;
  const skillFlag = listFlag(args, 'skill');
  const skills = skillFlag?.length === 1 && skillFlag[0] === 'none' ? [] : skillFlag;
  const request: RunRequestInput = {
    id: stringFlag(args, 'id') ?? `run-${randomUUID().slice(0, 8)}`,
    task,
    ...(system ? { system } : {}),
    ...(provider ? { provider: provider as RunRequestInput['provider'] } : {}),
    ...(model ? { model } : {}),
    ...(tools ? { tools } : {}),
    ...(toolSearch ? { tool_search: toolSearch as RunRequestInput['tool_search'] } : {}),
    ...(deferred.length > 0 ? { deferred } : {}),
    ...(config.tools?.always ? { always: config.tools.always } : {}),
    ...(Object.keys(limits).length > 0 ? { limits } : {}),
    ...(scriptPath ? { script: readScriptFile(scriptPath) } : {}),
    ...(skills ? { skills } : {}),
    ...(args.values['daemon'] === true ? { daemon: {} } : {}),
  };
  validate(RunRequestSchema, request, 'run request', ErrorCode.InvalidRequest);
  return request;
}

export async function runCommand(ctx: CommandContext): Promise<number> {
  const mode = ctx.natsUrl === undefined ? 'embedded' : 'nats';
  checkModeFlags(runSpec, ctx.args, mode);
  const request = buildRunRequest(ctx, await readTask(ctx));
  const json = ctx.args.values['json'] === true;
  const warned = new Set<string>();
  const warn = (code: string, message: string) => {
    if (warned.has(code)) return;
    warned.add(code);
    ctx.io.stderr.write(`agentmesh run: warning: ${message}\n`);
  };
  const human = createHumanRenderer(ctx.io.stdout, {
    color: Boolean(ctx.io.stdout.isTTY) && !process.env['NO_COLOR'],
  });
  const render = (e: RunEvent) => {
    const warning = runWarning(e);
    if (warning) warn(warning.code, warning.message);
    if (json) ctx.io.stdout.write(`${JSON.stringify(e)}\n`);
    else if (!warning) human(e);
  };
  const final =
    mode === 'embedded'
      ? await runEmbedded(ctx, request, render)
      : await runOverNats(ctx, request, { render, warn });
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
    const scoped = request.tools
      ? { ...request, tools: resolveToolEntries(request.tools, mesh.known) }
      : request;
    return await mesh.planner.execute(scoped, { signal: controller.signal, onEvent: render });
  } finally {
    process.off('SIGINT', onSignal);
    await mesh.stop();
  }
}

interface NatsRunOutput {
  render: (e: RunEvent) => void;
  warn: (code: string, message: string) => void;
}

async function runOverNats(
  ctx: CommandContext,
  input: RunRequestInput,
  out: NatsRunOutput,
): Promise<RunEvent> {
  const bus = await connectNats(ctx, 'agentmesh-cli');
  const s = subjects(ctx.prefix);
  try {
    await checkRunStream(bus, ctx);
    const baseUrl = stringFlag(ctx.args, 'base-url');
    const request = { ...input, ...(baseUrl ? { base_url: baseUrl } : {}) };
    if (request.tools) request.tools = expandPacks(request.tools);
    await checkFleetTools(bus, ctx, out.warn);
    const { run_id: runId, duplicate } = await submitRun(bus, request, { prefix: ctx.prefix });
    if (duplicate) ctx.io.stderr.write(`run ${runId} was submitted before: following its events\n`);
    let accepted = false;
    const waiting = setTimeout(() => {
      if (!accepted)
        ctx.io.stderr.write(
          `waiting for a planner to take run ${runId} (is one running? agentmesh planner --nats URL)...\n`,
        );
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
          out.render(event);
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
