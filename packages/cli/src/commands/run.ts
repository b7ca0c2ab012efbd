import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import {
  AgentMeshError,
  ErrorCode,
  RunRequestSchema,
  matchesToolPattern,
  publishJson,
  subjects,
  validate,
  type Backend,
  type RunEvent,
  type RunRequestInput,
} from '@agentmesh/protocol';
import {
  AGENT_TOOL_NAMES,
  checkProviderConfig,
  followRun,
  followTenantRun,
  readScriptFile,
  submitAsTenant,
  sendApprovalDecision,
  submitRun,
} from '@agentmesh/planner';
import { plannerOptions } from '../planner-options.js';
import { checkModeFlags, intFlag, listFlag, stringFlag, usageError } from '../args.js';
import { connectNats, tenantOption, type CommandContext } from '../context.js';
import { NO_TERMINAL_DENIAL, startEmbedded } from '../embedded.js';
import { embeddedDataDir } from '../sessions-dir.js';
import { PromptQueue } from '../prompt-queue.js';
import { createHumanRenderer, runWarning } from '../render.js';
import { resolveToolEntries } from '../tools.js';
import { checkFleetTools, checkRunStream, expandPacks } from './run-nats.js';
import { runSpec } from '../specs/run.js';

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
  const outputSchemaPath = stringFlag(args, 'output-schema');
  const baseUrl = stringFlag(args, 'base-url') ?? config.provider?.base_url;
  let provider =
    stringFlag(args, 'provider') ?? (scriptPath ? 'scripted' : undefined) ?? config.provider?.name;
  if (provider === undefined && baseUrl !== undefined) provider = 'openai-compatible';
  const maxIterations = intFlag(args, 'max-iterations');
  const { daemon_timeout_ms: _daemonLifetime, ...configured } = config.limits ?? {};
  const limits = {
    ...configured,
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
    ...(outputSchemaPath ? { output_schema: readOutputSchema(outputSchemaPath) } : {}),
    ...(stringFlag(args, 'tool-protocol')
      ? { tool_protocol: stringFlag(args, 'tool-protocol') as RunRequestInput['tool_protocol'] }
      : {}),
    ...(stringFlag(args, 'session') ? { session: stringFlag(args, 'session')! } : {}),
    ...(skills ? { skills } : {}),
    ...(args.values['daemon'] === true ? { daemon: {} } : {}),
  };
  validate(RunRequestSchema, request, 'run request', ErrorCode.InvalidRequest);
  return request;
}

/** Reads `--output-schema FILE`: a JSON object; anything else is a configuration error naming the file. */
export function readOutputSchema(path: string): Record<string, unknown> {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new AgentMeshError(
      ErrorCode.InvalidConfig,
      `--output-schema ${path}: cannot read a JSON Schema: ${(error as Error).message}`,
      { retryable: false },
    );
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw))
    throw new AgentMeshError(
      ErrorCode.InvalidConfig,
      `--output-schema ${path}: a JSON Schema must be a JSON object`,
      { retryable: false },
    );
  return raw as Record<string, unknown>;
}

export async function runCommand(ctx: CommandContext): Promise<number> {
  const mode = ctx.natsUrl === undefined ? 'embedded' : 'nats';
  checkModeFlags(runSpec, ctx.args, mode);
  const request = buildRunRequest(ctx, await readTask(ctx));
  const out = runOutput(ctx, 'run');
  const final =
    mode === 'embedded'
      ? await runEmbedded(ctx, request, out.render, explicitDataDir(ctx))
      : await runOverNats(ctx, request, out);
  return final.type === 'run.completed' && final.status === 'done' ? 0 : 1;
}

/** `--data-dir` or AGENTMESH_DATA_DIR when given: embedded runs then keep their records and transcripts there. */
function explicitDataDir(ctx: CommandContext): string | undefined {
  const given = stringFlag(ctx.args, 'data-dir', 'AGENTMESH_DATA_DIR');
  return given === undefined ? undefined : embeddedDataDir({ dataDir: given });
}

/** How a command that follows a run prints it: events as JSON lines or human lines, warnings once on stderr. */
export function runOutput(ctx: CommandContext, command: string): NatsRunOutput {
  const json = ctx.args.values['json'] === true;
  const warned = new Set<string>();
  const warn = (code: string, message: string) => {
    if (warned.has(code)) return;
    warned.add(code);
    ctx.io.stderr.write(`agentmesh ${command}: warning: ${message}\n`);
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
  return { render, warn };
}

/** Resolves `--tools` entries against the embedded tools; entries naming the planner's agent.* tools pass as is. */
export function scopeTools(
  entries: readonly string[],
  known: Parameters<typeof resolveToolEntries>[1],
): string[] {
  const isAgent = (entry: string) => AGENT_TOOL_NAMES.some((name) => matchesToolPattern(name, entry));
  const agent = entries.filter(isAgent);
  const rest = entries.filter((e) => !isAgent(e));
  if (rest.length > 0) resolveToolEntries(rest, known);
  // namespaces stay namespaces, so a child run may ask for one its parent was given
  return [...agent, ...rest.flatMap((entry) => known.packs?.[entry] ?? [entry])];
}

/**
 * Runs a request on an embedded mesh in this process. With `dataDir` (or a session, which defaults it) run records,
 * run transcripts and sessions are kept as files there.
 */
export async function runEmbedded(
  ctx: CommandContext,
  request: RunRequestInput,
  render: (e: RunEvent) => void,
  dataDir?: string,
): Promise<RunEvent> {
  const baseUrl = stringFlag(ctx.args, 'base-url') ?? ctx.config.provider?.base_url;
  checkProviderConfig(plannerOptions(ctx.config, baseUrl).providers, request);
  const yes = ctx.args.values['yes'] === true;
  const interactive = !yes && isTerminal(ctx);
  const mesh = await startEmbedded({
    // the command line runs its own planner: its flags (--max-iterations) set that planner's ceilings too
    config: request.limits
      ? { ...ctx.config, limits: { ...ctx.config.limits, ...request.limits } }
      : ctx.config,
    logger: ctx.logger,
    workspace: stringFlag(ctx.args, 'workspace', 'AGENTMESH_WORKSPACE'),
    baseUrl,
    io: ctx.io,
    // sessions, run records (forks) and tenants' budgets outlive the process in the data dir
    ...(dataDir === undefined && request.session === undefined && ctx.config.tenants === undefined
      ? {}
      : {
          dataDir:
            dataDir ??
            embeddedDataDir({
              dataDir: stringFlag(ctx.args, 'data-dir'),
              workspace: stringFlag(ctx.args, 'workspace', 'AGENTMESH_WORKSPACE'),
            }),
        }),
    askBeforeWrites: interactive,
    denyWrites: !yes && !interactive,
    approvals: ctx.config.approvals !== undefined || request.approvals !== undefined,
  });
  const controller = new AbortController();
  const onSignal = () => controller.abort(new Error('interrupted'));
  process.once('SIGINT', onSignal);
  try {
    const scoped = request.tools ? { ...request, tools: scopeTools(request.tools, mesh.known) } : request;
    const approvals = runApprovals(ctx, mesh.bus, scoped.id!, {
      prompts: mesh.prompts,
      embedded: true,
      prefix: mesh.planner.prefix,
    });
    return await mesh.planner.execute(scoped, {
      signal: controller.signal,
      onEvent: (e) => {
        render(e);
        approvals.onEvent(e);
      },
    });
  } finally {
    process.off('SIGINT', onSignal);
    await mesh.stop();
  }
}

export interface NatsRunOutput {
  render: (e: RunEvent) => void;
  warn: (code: string, message: string) => void;
}

export async function runOverNats(
  ctx: CommandContext,
  input: RunRequestInput,
  out: NatsRunOutput,
): Promise<RunEvent> {
  const tenant = tenantOption(ctx);
  const bus = await connectNats(ctx, 'agentmesh-cli', { tenant });
  const channel = runChannel(ctx, bus, tenant);
  try {
    if (tenant === undefined) await checkRunStream(bus, ctx);
    const baseUrl = stringFlag(ctx.args, 'base-url');
    const request = { ...input, ...(baseUrl ? { base_url: baseUrl } : {}) };
    if (request.tools) request.tools = expandPacks(request.tools);
    await checkFleetTools(bus, ctx, out.warn, tenant);
    const { run_id: runId, duplicate } = await channel.submit(request);
    const approvals = runApprovals(ctx, bus, runId, { tenant });
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
      channel.cancel(runId, 'interrupted from the command line');
    };
    process.on('SIGINT', onSignal);
    try {
      return await channel.follow(runId, (event) => {
        accepted = true;
        out.render(event);
        approvals.onEvent(event);
      });
    } finally {
      approvals.close();
      clearTimeout(waiting);
      process.off('SIGINT', onSignal);
    }
  } finally {
    await bus.close();
  }
}

/** Where a run goes and its events come from: the fleet's own subjects, or a tenant's API. */
function runChannel(ctx: CommandContext, bus: Backend, tenant: string | undefined) {
  const prefix = ctx.prefix;
  if (tenant === undefined)
    return {
      submit: (request: RunRequestInput) => submitRun(bus, request, { prefix }),
      follow: (runId: string, onEvent: (e: RunEvent) => void) => followRun(bus, runId, { prefix, onEvent }),
      cancel: (runId: string, reason: string) =>
        publishJson(bus, subjects(prefix).runCancel(runId), { reason }),
    };
  return {
    submit: (request: RunRequestInput) => submitAsTenant(bus, tenant, request, { prefix }),
    follow: (runId: string, onEvent: (e: RunEvent) => void) =>
      followTenantRun(bus, runId, { prefix, tenant, onEvent }),
    cancel: (runId: string, reason: string) =>
      publishJson(bus, subjects(prefix).tenant(tenant).run(runId, 'cancel'), { reason }),
  };
}

function isTerminal(ctx: CommandContext): boolean {
  return Boolean(ctx.io.stdin.isTTY) && Boolean(ctx.io.stdout.isTTY);
}

/**
 * Approvals of a run: asked on a TTY (one prompt per call, through the run's one prompt queue), approved with
 * --yes, otherwise left pending with a hint naming `agentmesh runs approve` (over NATS) or denied with a reason
 * naming --yes (embedded: nobody else can decide).
 */
function runApprovals(
  ctx: CommandContext,
  bus: Backend,
  runId: string,
  options: {
    prompts?: PromptQueue | undefined;
    embedded?: boolean;
    prefix?: string;
    tenant?: string | undefined;
  },
) {
  const yes = ctx.args.values['yes'] === true;
  const prompts =
    options.prompts ?? (!yes && isTerminal(ctx) ? new PromptQueue(ctx.io.stdin, ctx.io.stderr) : undefined);
  const owned = options.prompts === undefined;
  const by = `cli:${process.env['USER'] ?? 'user'}`;
  const decide = async (approvalId: string, approve: boolean, reason = 'declined on the terminal') => {
    try {
      await sendApprovalDecision(
        bus,
        runId,
        {
          approval_id: approvalId,
          decision: approve ? 'approve' : 'deny',
          by,
          ...(approve ? {} : { reason }),
        },
        { prefix: options.prefix ?? ctx.prefix, tenant: options.tenant },
      );
    } catch (error) {
      ctx.io.stderr.write(`agentmesh run: approval ${approvalId}: ${(error as Error).message}\n`);
    }
  };
  return {
    onEvent(event: RunEvent): void {
      if (event.type !== 'approval.requested') return;
      if (yes) void decide(event.approval_id, true);
      else if (prompts)
        void prompts.confirm(`${event.summary}. Allow?`).then((ok) => decide(event.approval_id, ok));
      else if (options.embedded === true) void decide(event.approval_id, false, NO_TERMINAL_DENIAL);
      else
        ctx.io.stderr.write(
          `run ${runId} waits for approval ${event.approval_id} (${event.summary}): ` +
            `agentmesh runs approve ${runId} ${event.approval_id}${options.tenant === undefined ? '' : ` --tenant ${options.tenant}`}, or deny it with agentmesh runs deny; --yes approves all\n`,
        );
    },
    close: () => {
      if (owned) prompts?.close();
    },
  };
}
