import {
  CatalogListReplySchema,
  NatsBus,
  ServiceName,
  requestJson,
  streamNames,
  subjects,
  type Bus,
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
  collectFrom(bus: Bus, prefix: string): void;
  close(): Promise<void>;
}

/** The metrics `actor` label of an actor's service name. */
export function actorKindOf(serviceName: string): ActorKind {
  if (serviceName === ServiceName.Planner) return 'planner';
  if (serviceName === ServiceName.Catalog) return 'catalog';
  return 'tool-worker';
}

function collectIntakeLag(metrics: PrometheusActorMetrics, bus: Bus, prefix: string): void {
  if (!(bus instanceof NatsBus)) return;
  metrics.onCollect(async () => {
    const jsm = await bus.jetstreamManager();
    let pending = 0;
    for await (const c of jsm.consumers.list(streamNames(prefix).runs)) pending += c.num_pending;
    metrics.setIntakeLag(pending);
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
