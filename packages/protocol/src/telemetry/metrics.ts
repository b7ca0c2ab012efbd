import { Counter, Gauge, Histogram, Registry } from 'prom-client';

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
  setCatalogTools(counts: { registered: number; available: number }): void;
  /** Run requests waiting in the runs stream (JetStream consumer pending). */
  setIntakeLag(pending: number): void;
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

/** Creates one registry with the agentmesh metric set; `actor` becomes a default label on every series. */
export function createActorMetrics(
  actor: ActorKind,
  options: { labels?: Record<string, string> } = {},
): PrometheusActorMetrics {
  const registry = new Registry();
  registry.setDefaultLabels({ actor, ...options.labels });
  const registers = [registry];
  const runsStarted = new Counter({
    name: 'agentmesh_runs_started_total',
    help: 'Runs this planner started',
    registers,
  });
  const runsFinished = new Counter({
    name: 'agentmesh_runs_finished_total',
    help: 'Runs that reached a final status, by status',
    labelNames: ['status'],
    registers,
  });
  const runDuration = new Histogram({
    name: 'agentmesh_run_duration_seconds',
    help: 'Run duration from start to final status',
    labelNames: ['status'],
    buckets: RUN_BUCKETS,
    registers,
  });
  const modelCalls = new Counter({
    name: 'agentmesh_model_calls_total',
    help: 'Model calls by provider, model and outcome',
    labelNames: ['provider', 'model', 'outcome'],
    registers,
  });
  const modelTokens = new Counter({
    name: 'agentmesh_model_tokens_total',
    help: 'Model tokens by provider, model and direction (input | output)',
    labelNames: ['provider', 'model', 'direction'],
    registers,
  });
  const modelDuration = new Histogram({
    name: 'agentmesh_model_call_duration_seconds',
    help: 'Model call duration',
    labelNames: ['provider', 'model'],
    buckets: RUN_BUCKETS,
    registers,
  });
  const toolCalls = new Counter({
    name: 'agentmesh_tool_calls_total',
    help: 'Tool calls by tool and outcome',
    labelNames: ['tool', 'outcome'],
    registers,
  });
  const toolDuration = new Histogram({
    name: 'agentmesh_tool_call_duration_seconds',
    help: 'Tool call duration',
    labelNames: ['tool'],
    buckets: DURATION_BUCKETS,
    registers,
  });
  const toolInFlight = new Gauge({
    name: 'agentmesh_tool_calls_in_flight',
    help: 'Tool calls executing now',
    registers,
  });
  const runsInFlight = new Gauge({ name: 'agentmesh_runs_in_flight', help: 'Runs running now', registers });
  const admission = new Gauge({
    name: 'agentmesh_admission_queue_depth',
    help: 'Tool calls admitted and waiting for an execution slot',
    registers,
  });
  const catalogTools = new Gauge({
    name: 'agentmesh_catalog_tools',
    help: 'Tools known to the catalog, by state (registered | available)',
    labelNames: ['state'],
    registers,
  });
  const intakeLag = new Gauge({
    name: 'agentmesh_intake_lag',
    help: 'Run requests waiting in the runs stream (consumer pending)',
    registers,
  });
  const collectors: (() => void | Promise<void>)[] = [];
  const toolCounters = new Map<string, { inc(): void }>();
  const toolTimers = new Map<string, { observe(value: number): void }>();
  const toolCounter = (tool: string, outcome: string) => {
    const key = `${tool}\u0000${outcome}`;
    let child = toolCounters.get(key);
    if (child === undefined) toolCounters.set(key, (child = toolCalls.labels({ tool, outcome })));
    return child;
  };
  const toolTimer = (tool: string) => {
    let child = toolTimers.get(tool);
    if (child === undefined) toolTimers.set(tool, (child = toolDuration.labels({ tool })));
    return child;
  };
  return {
    registry,
    contentType: registry.contentType,
    runStarted: () => runsStarted.inc(),
    runFinished: (status, seconds) => {
      runsFinished.inc({ status });
      runDuration.observe({ status }, seconds);
    },
    modelCall: (o) => {
      modelCalls.inc({ provider: o.provider, model: o.model, outcome: o.outcome ?? 'ok' });
      if (o.inputTokens)
        modelTokens.inc({ provider: o.provider, model: o.model, direction: 'input' }, o.inputTokens);
      if (o.outputTokens)
        modelTokens.inc({ provider: o.provider, model: o.model, direction: 'output' }, o.outputTokens);
      if (o.durationSeconds !== undefined)
        modelDuration.observe({ provider: o.provider, model: o.model }, o.durationSeconds);
    },
    toolCall: (o) => {
      toolCounter(o.tool, o.outcome).inc();
      toolTimer(o.tool).observe(o.durationSeconds);
    },
    toolCallsInFlight: (delta) => toolInFlight.inc(delta),
    runsInFlight: (delta) => runsInFlight.inc(delta),
    setAdmissionQueueDepth: (depth) => admission.set(depth),
    setCatalogTools: ({ registered, available }) => {
      catalogTools.set({ state: 'registered' }, registered);
      catalogTools.set({ state: 'available' }, available);
    },
    setIntakeLag: (pending) => intakeLag.set(pending),
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
  setCatalogTools: noop,
  setIntakeLag: noop,
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
