import { hostname } from 'node:os';
import { AgentMeshError, ErrorCode, ServiceName, type Backend, type Logger } from '@agentmesh/protocol';
import { Catalog, parseRegistrationRoles } from '@agentmesh/catalog';
import { ToolWorker } from '@agentmesh/tool-worker';
import { DEFAULT_DRAIN_TIMEOUT_MS, PLANNER_VERSION, Planner } from '@agentmesh/planner';
import { ACTOR_FLAGS, intFlag, listFlag, stringFlag, type CommandSpec, type ParsedArgs } from '../args.js';
import { connectNats, type CommandContext } from '../context.js';
import { startHealthServer, type HealthServer } from '../health.js';
import { actorKindOf, serveActorMetrics } from '../metrics.js';
import { plannerOptions } from '../planner-options.js';
import { selectTools } from '../tools.js';
import { workerMcpTools } from '../interop/mcp-command.js';

export const catalogSpec: CommandSpec = {
  name: 'catalog',
  usage: 'agentmesh catalog [flags]',
  summary: 'Runs the catalog actor against NATS: tool registration, liveness, exposure and search.',
  flags: {
    ...ACTOR_FLAGS,
    'worker-ttl-ms': {
      type: 'string',
      value: 'MS',
      description: 'forget a worker after this long without a heartbeat (default 10000)',
    },
    roles: {
      type: 'string',
      value: 'ROLES',
      description:
        'worker roles and the tool namespaces each may register, e.g. "worker=*;worker_math=math" (catalog.roles)',
      env: 'AGENTMESH_CATALOG_ROLES',
    },
  },
};

export const plannerSpec: CommandSpec = {
  name: 'planner',
  usage: 'agentmesh planner [flags]',
  summary:
    'Runs a planner actor against NATS: takes runs from the AGENTMESH_RUNS stream and runs the agent loop.',
  flags: {
    ...ACTOR_FLAGS,
    'max-runs': {
      type: 'string',
      value: 'N',
      description: 'runs handled at once by this planner (default 256)',
    },
    'base-url': {
      type: 'string',
      value: 'URL',
      description: 'base URL of an OpenAI-compatible server',
      env: 'OPENAI_BASE_URL',
    },
    'drain-timeout': {
      type: 'string',
      value: 'DURATION',
      description:
        'on SIGTERM, hand every run to other planners within this long (default 30s; e.g. 500ms, 2m)',
      env: 'AGENTMESH_DRAIN_TIMEOUT',
    },
    'version-tag': {
      type: 'string',
      value: 'TAG',
      description: `the build shown by "agentmesh status" (default: the package version, ${PLANNER_VERSION})`,
      env: 'AGENTMESH_VERSION_TAG',
    },
  },
};

export const workerSpec: CommandSpec = {
  name: 'worker',
  usage: 'agentmesh worker [flags]',
  summary:
    'Runs a tool-worker actor against NATS: serves its tools in queue groups shared with other replicas.',
  flags: {
    ...ACTOR_FLAGS,
    tools: {
      type: 'string',
      value: 'LIST',
      description: 'packs (builtin, workspace) and/or tool names, namespaces or globs',
    },
    workspace: {
      type: 'string',
      value: 'DIR',
      description: 'workspace folder for the workspace pack',
      env: 'AGENTMESH_WORKSPACE',
    },
    threads: {
      type: 'string',
      value: 'N',
      description: 'piscina threads for CPU-bound tools (default: cores)',
    },
    concurrency: {
      type: 'string',
      value: 'N',
      description: 'calls in flight at most before answering busy (default 64)',
    },
    mcp: {
      type: 'string',
      description: 'also serve the tools of these configured MCP servers (mcp.servers)',
    },
    role: {
      type: 'string',
      value: 'ROLE',
      description: 'register as this role (its NATS user) on catalog.register.<ROLE>',
      env: 'AGENTMESH_WORKER_ROLE',
    },
    artifacts: {
      type: 'string',
      value: 'MODE',
      description:
        'shared (default) or off: keep no artifacts, serve no fetches (a user without the artifacts grant)',
      env: 'AGENTMESH_WORKER_ARTIFACTS',
    },
  },
};

interface Actor {
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** Runs one actor until SIGTERM/SIGINT: drains in-flight work, then exits 0. */
async function serveActor(
  ctx: CommandContext,
  name: string,
  build: (bus: Backend, logger: Logger) => Actor,
): Promise<number> {
  const logger = ctx.logger.child({ actor: name });
  const healthPort = intFlag(ctx.args, 'health-port', 'AGENTMESH_HEALTH_PORT');
  let health: HealthServer | undefined;
  if (healthPort !== undefined) health = await startHealthServer(healthPort);
  const metrics = await serveActorMetrics(ctx, actorKindOf(name));
  const bus = await connectNats(ctx, `${name}@${hostname()}`);
  metrics?.collectFrom(bus, ctx.prefix);
  const actor = build(bus, logger);
  await actor.start();
  health?.setReady(true);
  bus.onStatus((s) => {
    if (s.type === 'disconnect') health?.setReady(false);
    if (s.type === 'reconnect') health?.setReady(true);
  });
  logger.info({ nats: ctx.natsUrl, prefix: ctx.prefix }, `${name} ready`);
  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      logger.info({ signal }, `${name} draining`);
      resolve();
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  health?.setReady(false);
  await actor.stop();
  await bus.drain();
  await health?.close();
  await metrics?.close();
  logger.info(`${name} stopped`);
  logger.flush();
  return 0;
}

export function catalogCommand(ctx: CommandContext): Promise<number> {
  const ttl = intFlag(ctx.args, 'worker-ttl-ms') ?? ctx.config.catalog?.worker_ttl_ms;
  const rolesText = stringFlag(ctx.args, 'roles', 'AGENTMESH_CATALOG_ROLES');
  const roles = rolesText === undefined ? ctx.config.catalog?.roles : parseRegistrationRoles(rolesText);
  return serveActor(ctx, ServiceName.Catalog, (bus, logger) => {
    const catalog = new Catalog({
      bus,
      logger,
      prefix: ctx.prefix,
      ...(ttl === undefined ? {} : { workerTtlMs: ttl }),
      ...(roles === undefined ? {} : { roles }),
      exposure: {
        ...(ctx.config.tools?.deferred ? { deferred: ctx.config.tools.deferred } : {}),
        ...(ctx.config.tools?.always ? { always: ctx.config.tools.always } : {}),
      },
    });
    return { start: () => catalog.start(), stop: () => catalog.stop() };
  });
}

export function plannerCommand(ctx: CommandContext): Promise<number> {
  const maxRuns = intFlag(ctx.args, 'max-runs');
  const baseUrl = stringFlag(ctx.args, 'base-url') ?? ctx.config.provider?.base_url;
  const drainTimeoutMs =
    durationFlag(ctx.args, 'drain-timeout', 'AGENTMESH_DRAIN_TIMEOUT') ?? DEFAULT_DRAIN_TIMEOUT_MS;
  const versionTag = stringFlag(ctx.args, 'version-tag', 'AGENTMESH_VERSION_TAG');
  return serveActor(ctx, ServiceName.Planner, (bus, logger) => {
    const planner = new Planner({
      bus,
      logger,
      prefix: ctx.prefix,
      ...plannerOptions(ctx.config, baseUrl),
      ...(maxRuns === undefined ? {} : { maxConcurrentRuns: maxRuns }),
      ...(versionTag === undefined ? {} : { versionTag }),
    });
    return {
      start: () => planner.start(),
      stop: () => planner.drain({ handOff: true, timeoutMs: drainTimeoutMs }),
    };
  });
}

export async function workerCommand(ctx: CommandContext): Promise<number> {
  const threads = intFlag(ctx.args, 'threads');
  const concurrency = intFlag(ctx.args, 'concurrency');
  const role = stringFlag(ctx.args, 'role', 'AGENTMESH_WORKER_ROLE');
  const artifacts = artifactsFlag(stringFlag(ctx.args, 'artifacts', 'AGENTMESH_WORKER_ARTIFACTS'));
  const selected = selectTools({
    select: listFlag(ctx.args, 'tools'),
    workspace: stringFlag(ctx.args, 'workspace', 'AGENTMESH_WORKSPACE'),
    config: ctx.config,
    logger: ctx.logger,
  });
  const mcp = await workerMcpTools(ctx);
  return serveActor(ctx, ServiceName.ToolWorker, (bus, logger) => {
    const worker = new ToolWorker({
      bus,
      logger,
      prefix: ctx.prefix,
      tools: [...selected.tools, ...(mcp?.tools ?? [])],
      ...(threads === undefined ? {} : { threads }),
      ...(concurrency === undefined ? {} : { concurrency }),
      ...(role === undefined ? {} : { role }),
      artifacts,
      ...(selected.workspaceRoot === undefined ? {} : { watchRoot: selected.workspaceRoot }),
    });
    mcp?.reportTo(bus, worker.workerId, ctx.prefix);
    mcp?.keepInSync(worker);
    return {
      start: () => worker.start(),
      stop: async () => {
        await worker.drain();
        await selected.close();
        await mcp?.close();
      },
    };
  });
}

const DURATION_UNITS_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000 };

/** A duration flag: `500ms`, `10s`, `2m`, or a bare number of milliseconds. */
function durationFlag(args: ParsedArgs, name: string, env: string): number | undefined {
  const value = stringFlag(args, name, env);
  if (value === undefined) return undefined;
  const match = /^(\d+(?:\.\d+)?)(ms|s|m)?$/.exec(value.trim());
  if (match === null)
    throw new AgentMeshError(
      ErrorCode.InvalidRequest,
      `--${name} must be a duration such as 500ms, 30s or 2m, got "${value}"`,
      { retryable: false, details: { usage: true, flag: name, value } },
    );
  return Math.round(Number(match[1]) * DURATION_UNITS_MS[match[2] ?? 'ms']!);
}

/** `--artifacts`: `shared` (default) or `off`. */
function artifactsFlag(value: string | undefined): boolean {
  if (value === undefined || value === 'shared') return true;
  if (value === 'off') return false;
  throw new AgentMeshError(
    ErrorCode.InvalidRequest,
    `--artifacts must be "shared" or "off", got "${value}"`,
    {
      retryable: false,
      details: { flag: 'artifacts', value },
    },
  );
}
