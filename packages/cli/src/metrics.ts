import {
  CatalogListReplySchema,
  ServiceName,
  openRunIntake,
  requestJson,
  subjects,
  type Backend,
  type Bus,
  type WorkQueue,
  createActorMetrics,
  setProcessMetrics,
  startMetricsServer,
  NOOP_METRICS,
  type ActorKind,
  type MetricsServer,
  type PrometheusActorMetrics,
} from '@agentmesh/protocol';
import { intFlag } from './args.js';
import type { CommandContext } from './context.js';

export interface ActorMetricsHandle {
  readonly metrics: PrometheusActorMetrics;
  readonly server: MetricsServer;
  /** Adds the actor's polled gauges: intake lag for a planner, tools registered / available for the catalog. */
  collectFrom(bus: Backend, prefix: string): void;
  close(): Promise<void>;
}

/** The metrics `actor` label of an actor's service name. */
export function actorKindOf(serviceName: string): ActorKind {
  if (serviceName === ServiceName.Planner) return 'planner';
  if (serviceName === ServiceName.Catalog) return 'catalog';
  return 'tool-worker';
}

/** Intake lag: run requests in the durable intake that no planner has taken yet. */
function collectIntakeLag(metrics: PrometheusActorMetrics, backend: Backend, prefix: string): void {
  if (!backend.durable) return;
  let intake: Promise<WorkQueue> | undefined;
  metrics.onCollect(async () => {
    intake ??= openRunIntake(backend, prefix).catch((error: unknown) => {
      intake = undefined;
      throw error;
    });
    const consumers = await (await intake).consumers();
    metrics.setIntakeLag(consumers.reduce((sum, c) => sum + c.pending, 0));
  });
}

function collectCatalogTools(metrics: PrometheusActorMetrics, bus: Bus, prefix: string): void {
  metrics.onCollect(async () => {
    const reply = await requestJson(bus, subjects(prefix).catalogList, {}, CatalogListReplySchema, {
      timeoutMs: 2000,
    });
    const registered = reply.total ?? reply.tools.length;
    metrics.setCatalogTools({ registered, available: reply.tools.filter((t) => t.workers > 0).length });
  });
}

/**
 * With `--metrics-port P` (or AGENTMESH_METRICS_PORT) installs this process's actor metrics and serves them at
 * `GET /metrics`; without, records nothing and returns undefined.
 */
export async function serveActorMetrics(
  ctx: CommandContext,
  actor: ActorKind,
): Promise<ActorMetricsHandle | undefined> {
  const port = intFlag(ctx.args, 'metrics-port', 'AGENTMESH_METRICS_PORT');
  if (port === undefined) return undefined;
  const metrics = createActorMetrics(actor);
  const server = await startMetricsServer(metrics, { port });
  setProcessMetrics(metrics);
  ctx.logger.info({ port: server.port }, 'metrics at /metrics');
  return {
    metrics,
    server,
    collectFrom: (bus, prefix) => {
      if (actor === 'planner') collectIntakeLag(metrics, bus, prefix);
      if (actor === 'catalog') collectCatalogTools(metrics, bus, prefix);
    },
    close: async () => {
      setProcessMetrics(NOOP_METRICS);
      await server.close();
    },
  };
}
