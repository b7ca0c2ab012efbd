import { hostname } from 'node:os';
import { AgentMeshError, ErrorCode, ServiceName, type Backend, type Logger } from '@agentmesh/protocol';
import type { McpToolSource } from '@agentmesh/tool-worker';
import { startActor, type Actor } from '../actor-startup.js';
import { intFlag, listFlag, stringFlag, type ParsedArgs } from '../args.js';
import { connectNats, type CommandContext } from '../context.js';
import type { HealthServer } from '../health.js';
import { actorKindOf, serveActorMetrics } from '../metrics.js';

/** Runs one actor until SIGTERM/SIGINT: drains in-flight work, then exits 0. */
async function serveActor(
  ctx: CommandContext,
  name: string,
  build: (bus: Backend, logger: Logger) => Actor,
): Promise<number> {
  const logger = ctx.logger.child({ actor: name });
  const healthPort = intFlag(ctx.args, 'health-port', 'AGENTMESH_HEALTH_PORT');
  let health: HealthServer | undefined;
  if (healthPort !== undefined) health = await (await import('../health.js')).startHealthServer(healthPort);
  const metrics = await serveActorMetrics(ctx, actorKindOf(name));
  const { bus, actor } = await startActor(
    name,
    ctx.natsUrl,
    logger,
    () => connectNats(ctx, `${name}@${hostname()}`),
    (b) => build(b, logger),
  );
  metrics?.collectFrom(bus, ctx.prefix);
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

export async function catalogCommand(ctx: CommandContext): Promise<number> {
  const { Catalog, parseRegistrationRoles } = await import('@agentmesh/catalog');
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

export async function plannerCommand(ctx: CommandContext): Promise<number> {
  const { Planner, DEFAULT_DRAIN_TIMEOUT_MS } = await import('@agentmesh/planner');
  const { plannerOptions } = await import('../planner-options.js');
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
  const { ToolWorker } = await import('@agentmesh/tool-worker');
  const { selectTools } = await import('../tools.js');
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

/** The MCP tools of the servers named by `--mcp` (none when it is absent), for `agentmesh worker`. */
async function workerMcpTools(ctx: CommandContext): Promise<McpToolSource | undefined> {
  const names = listFlag(ctx.args, 'mcp');
  if (names === undefined) return undefined;
  const { McpToolSource } = await import('@agentmesh/tool-worker');
  return McpToolSource.connect(ctx.config.mcp, { logger: ctx.logger, only: names });
}
