import { createRequire } from 'node:module';
import type { Registry } from 'prom-client';

const requireCjs = createRequire(import.meta.url);

/** prom-client, loaded with the first registry: a process that serves no metrics never loads it. */
function promClient(): typeof import('prom-client') {
  return requireCjs('prom-client') as typeof import('prom-client');
}

/** Which actor a registry belongs to; becomes the `actor` label on every series. */
export type ActorKind = 'planner' | 'tool-worker' | 'catalog' | 'console' | 'embedded';

export type RunFinishStatus = string;
export type ToolCallOutcome = 'ok' | 'error' | 'timeout' | 'busy' | 'cancelled' | (string & {});

/**
 * The metrics an actor records. Call sites use these few methods and never see prom-client; a process without
 * `--metrics-port` gets {@link NOOP_METRICS}.
 */
export interface ActorMetrics {
  runStarted(): void;
  runFinished(status: RunFinishStatus, durationSeconds: number): void;
  modelCall(options: {
    provider: string;
    model: string;
    outcome?: string;
    inputTokens?: number | undefined;
    outputTokens?: number | undefined;
    durationSeconds?: number | undefined;
  }): void;
  toolCall(options: { tool: string; outcome: ToolCallOutcome; durationSeconds: number }): void;
  /** +1 when a tool call starts executing, -1 when it ends (worker side). */
  toolCallsInFlight(delta: number): void;
  /** +1 when a run starts on this planner, -1 when it ends. */
  runsInFlight(delta: number): void;
  setAdmissionQueueDepth(depth: number): void;
  /** A worker answered a call of `tool` `busy` (full or draining): the call goes to another replica or waits. */
  toolCallRefused(tool: string): void;
  /** A worker said it has room again for `tool` (a capacity notice). */
  capacityNotice(tool: string): void;
  setCatalogTools(counts: { registered: number; available: number }): void;
  /** Run requests waiting in the runs stream (JetStream consumer pending). */
  setIntakeLag(pending: number): void;
  /** Runs of `tenant` waiting to start in the fair intake (tenants configured). */
  setTenantQueueDepth(tenant: string, depth: number): void;
  /** A run of `tenant` started after waiting `seconds` in the fair intake. */
  tenantQueueWait(tenant: string, seconds: number): void;
  /** Runs before every scrape, e.g. to read a queue depth that is cheaper to poll than to track. */
  onCollect(collect: () => void | Promise<void>): void;
}

/** An actor's metrics with its Prometheus registry, for `/metrics`. */
export interface PrometheusActorMetrics extends ActorMetrics {
  readonly registry: Registry;
  /** The Prometheus text exposition of every metric (runs `onCollect` callbacks first). */
  scrape(): Promise<string>;
  readonly contentType: string;
}

const DURATION_BUCKETS = [0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60];
const RUN_BUCKETS = [0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900];

function defineMetrics(registry: Registry) {
  const { Counter, Gauge, Histogram } = promClient();
  const registers = [registry];
  const counter = (name: string, help: string, labelNames: string[] = []) =>
    new Counter({ name, help, labelNames, registers });
  const gauge = (name: string, help: string, labelNames: string[] = []) =>
    new Gauge({ name, help, labelNames, registers });
  const histogram = (name: string, help: string, labelNames: string[], buckets: number[]) =>
    new Histogram({ name, help, labelNames, buckets, registers });
  return {
    runsStarted: counter('agentmesh_runs_started_total', 'Runs this planner started'),
    runsFinished: counter('agentmesh_runs_finished_total', 'Runs that reached a final status, by status', [
      'status',
    ]),
    runDuration: histogram(
      'agentmesh_run_duration_seconds',
      'Run duration from start to final status',
      ['status'],
      RUN_BUCKETS,
    ),
    modelCalls: counter('agentmesh_model_calls_total', 'Model calls by provider, model and outcome', [
      'provider',
      'model',
      'outcome',
    ]),
    modelTokens: counter(
      'agentmesh_model_tokens_total',
      'Model tokens by provider, model and direction (input | output)',
      ['provider', 'model', 'direction'],
    ),
    modelDuration: histogram(
      'agentmesh_model_call_duration_seconds',
      'Model call duration',
      ['provider', 'model'],
      RUN_BUCKETS,
    ),
    toolCalls: counter('agentmesh_tool_calls_total', 'Tool calls by tool and outcome', ['tool', 'outcome']),
    toolDuration: histogram(
      'agentmesh_tool_call_duration_seconds',
      'Tool call duration',
      ['tool'],
      DURATION_BUCKETS,
    ),
    toolInFlight: gauge('agentmesh_tool_calls_in_flight', 'Tool calls executing now'),
    runsInFlight: gauge('agentmesh_runs_in_flight', 'Runs running now'),
    admission: gauge(
      'agentmesh_admission_queue_depth',
      'Tool calls admitted and waiting for an execution slot',
    ),
    toolRefused: counter(
      'agentmesh_tool_calls_refused_total',
      'Tool calls this worker answered busy (full or draining), by tool',
      ['tool'],
    ),
    capacityNotices: counter(
      'agentmesh_capacity_notices_total',
      'Notices that this worker has room again for a tool whose calls it turned away',
      ['tool'],
    ),
    catalogTools: gauge(
      'agentmesh_catalog_tools',
      'Tools known to the catalog, by state (registered | available)',
      ['state'],
    ),
    intakeLag: gauge('agentmesh_intake_lag', 'Run requests waiting in the runs stream (consumer pending)'),
    tenantQueueDepth: gauge(
      'agentmesh_tenant_queued_runs',
      'Runs waiting to start in the fair intake, by tenant',
      ['tenant'],
    ),
    tenantQueueWait: histogram(
      'agentmesh_tenant_queue_wait_seconds',
      'How long a run waited in the fair intake before it started, by tenant',
      ['tenant'],
      RUN_BUCKETS,
    ),
  };
}

/** Label children per tool and outcome, so a tool call does not hash its labels on every count. */
function toolCallRecorder(m: ReturnType<typeof defineMetrics>) {
  const counters = new Map<string, { inc(): void }>();
  const timers = new Map<string, { observe(value: number): void }>();
  return (tool: string, outcome: string, seconds: number): void => {
    const key = `${tool}\u0000${outcome}`;
    let counter = counters.get(key);
    if (counter === undefined) counters.set(key, (counter = m.toolCalls.labels({ tool, outcome })));
    let timer = timers.get(tool);
    if (timer === undefined) timers.set(tool, (timer = m.toolDuration.labels({ tool })));
    counter.inc();
    timer.observe(seconds);
  };
}

/** Creates one registry with the agentmesh metric set; `actor` becomes a default label on every series. */
export function createActorMetrics(
  actor: ActorKind,
  options: { labels?: Record<string, string> } = {},
): PrometheusActorMetrics {
  const registry = new (promClient().Registry)();
  registry.setDefaultLabels({ actor, ...options.labels });
  const m = defineMetrics(registry);
  const recordToolCall = toolCallRecorder(m);
  const collectors: (() => void | Promise<void>)[] = [];
  return {
    registry,
    contentType: registry.contentType,
    runStarted: () => m.runsStarted.inc(),
    runFinished: (status, seconds) => {
      m.runsFinished.inc({ status });
      m.runDuration.observe({ status }, seconds);
    },
    modelCall: (o) => {
      const labels = { provider: o.provider, model: o.model };
      m.modelCalls.inc({ ...labels, outcome: o.outcome ?? 'ok' });
      if (o.inputTokens) m.modelTokens.inc({ ...labels, direction: 'input' }, o.inputTokens);
      if (o.outputTokens) m.modelTokens.inc({ ...labels, direction: 'output' }, o.outputTokens);
      if (o.durationSeconds !== undefined) m.modelDuration.observe(labels, o.durationSeconds);
    },
    toolCall: (o) => recordToolCall(o.tool, o.outcome, o.durationSeconds),
    toolCallsInFlight: (delta) => m.toolInFlight.inc(delta),
    runsInFlight: (delta) => m.runsInFlight.inc(delta),
    setAdmissionQueueDepth: (depth) => m.admission.set(depth),
    toolCallRefused: (tool) => m.toolRefused.inc({ tool }),
    capacityNotice: (tool) => m.capacityNotices.inc({ tool }),
    setCatalogTools: ({ registered, available }) => {
      m.catalogTools.set({ state: 'registered' }, registered);
      m.catalogTools.set({ state: 'available' }, available);
    },
    setIntakeLag: (pending) => m.intakeLag.set(pending),
    setTenantQueueDepth: (tenant, depth) => m.tenantQueueDepth.set({ tenant }, depth),
    tenantQueueWait: (tenant, seconds) => m.tenantQueueWait.observe({ tenant }, seconds),
    onCollect: (collect) => {
      collectors.push(collect);
    },
    scrape: async () => {
      await Promise.all(collectors.map(async (c) => c()));
      return registry.metrics();
    },
  };
}

const noop = (): void => undefined;

/** Metrics that record nothing: the default until a process asks for `/metrics`. */
export const NOOP_METRICS: ActorMetrics = {
  runStarted: noop,
  runFinished: noop,
  modelCall: noop,
  toolCall: noop,
  toolCallsInFlight: noop,
  runsInFlight: noop,
  setAdmissionQueueDepth: noop,
  toolCallRefused: noop,
  capacityNotice: noop,
  setCatalogTools: noop,
  setIntakeLag: noop,
  setTenantQueueDepth: noop,
  tenantQueueWait: noop,
  onCollect: noop,
};

let processMetrics: ActorMetrics = NOOP_METRICS;

/**
 * The metrics of this process's actor: {@link NOOP_METRICS} unless the CLI (or an embedding program) installed a
 * registry with {@link setProcessMetrics}. Actors call this at their hooks, so no constructor needs a new option.
 */
export function actorMetrics(): ActorMetrics {
  return processMetrics;
}

/** Installs the metrics every actor of this process records into (returns the previous ones). */
export function setProcessMetrics(metrics: ActorMetrics): ActorMetrics {
  const previous = processMetrics;
  processMetrics = metrics;
  return previous;
}
