import {
  RunEventSchema,
  ServiceName,
  subjects,
  type Backend,
  type Logger,
  type RunEvent,
  type Subscription,
} from '@agentmesh/protocol';
import { listRuns, readRunEvents } from '@agentmesh/planner';

/** One row of the runs page. */
export interface RunSummary {
  run_id: string;
  status: string;
  task: string;
  tenant: string | undefined;
  session: string | undefined;
  planner_id: string | undefined;
  accepted_at: string | undefined;
  updated_at: string;
  iterations: number;
  tool_calls: number;
  last_seq: number;
  /** A run waiting in its tenant's queue (fair intake): its place when it was queued. */
  queue_position?: number | undefined;
}

export interface RunFilter {
  status?: string | undefined;
  tenant?: string | undefined;
  session?: string | undefined;
  /** A substring of the run id. */
  q?: string | undefined;
  limit?: number | undefined;
}

/** An actor's load as the console saw it in the run events (undefined for the catalog). */
export type ActorLoad = { in_flight: number; total: number; unit: 'runs' | 'tool calls' } | undefined;

type Listener = (summary: RunSummary, event: RunEvent | undefined) => void;

interface RunEntry {
  summary: RunSummary;
  events: RunEvent[];
  backfilled: boolean;
}

const MAX_RUNS = 2000;
const MAX_EVENTS_PER_RUN = 5000;

/**
 * The console's view of the runs: every run event seen on the bus since start, a summary per run, and (on NATS)
 * the run records and stored events of runs that started before the console did.
 */
export class RunIndex {
  private readonly runs = new Map<string, RunEntry>();
  private readonly listeners = new Set<Listener>();
  private readonly workerLoad = new Map<string, { calls: number; inFlight: Set<string> }>();
  private sub: Subscription | undefined;

  constructor(
    private readonly bus: Backend,
    private readonly prefix: string,
    private readonly logger: Logger,
  ) {}

  /** Starts following `runs.*.events`; on NATS also loads the newest run records. */
  async start(): Promise<void> {
    this.sub = this.bus.subscribe(subjects(this.prefix).allRunEvents, (msg) => {
      const parsed = RunEventSchema.safeParse(safeJson(msg.text()));
      if (parsed.success) this.add(parsed.data);
    });
    if (this.bus.kind !== 'nats') return;
    const records = await listRuns(this.bus, { prefix: this.prefix, limit: 200 }).catch((error: unknown) => {
      this.logger.warn({ err: (error as Error).message }, 'run records unavailable');
      return [];
    });
    for (const r of records) {
      const entry = this.entry(r.run_id);
      const s = entry.summary;
      if (s.status === 'unknown') s.status = r.state === 'finished' ? (r.status ?? 'finished') : 'running';
      s.task ||= r.task ?? '';
      s.planner_id ??= r.planner_id;
      s.accepted_at ??= r.accepted_at;
      s.updated_at = r.finished_at ?? r.accepted_at;
    }
  }

  stop(): void {
    this.sub?.unsubscribe();
    this.listeners.clear();
  }

  /** Calls `listener` with every run update until the returned function is called. */
  onUpdate(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  list(filter: RunFilter = {}): RunSummary[] {
    const q = filter.q?.toLowerCase();
    return [...this.runs.values()]
      .map((e) => e.summary)
      .filter(
        (s) =>
          (!filter.status || s.status === filter.status) &&
          (!filter.tenant || s.tenant === filter.tenant) &&
          (!filter.session || s.session === filter.session) &&
          (!q || s.run_id.toLowerCase().includes(q)),
      )
      .sort((a, b) => (b.accepted_at ?? b.updated_at).localeCompare(a.accepted_at ?? a.updated_at))
      .slice(0, filter.limit ?? 200);
  }

  /** A run's summary and events (on NATS loaded from the events stream the first time). */
  async get(runId: string): Promise<{ summary: RunSummary; events: RunEvent[] } | undefined> {
    let entry = this.runs.get(runId);
    if (this.bus.kind === 'nats' && (entry === undefined || !entry.backfilled)) {
      const stored = await readRunEvents(this.bus, runId, { prefix: this.prefix }).catch(() => []);
      if (stored.length > 0 || entry !== undefined) {
        entry = this.entry(runId);
        entry.backfilled = true;
        for (const event of stored) this.add(event, false);
      }
    }
    return entry === undefined ? undefined : { summary: entry.summary, events: entry.events };
  }

  /** Records one event (idempotent by seq) and tells the listeners. */
  add(event: RunEvent, notify = true): void {
    const entry = this.entry(event.run_id);
    const { events } = entry;
    const last = events.at(-1);
    if (last === undefined || event.seq > last.seq) events.push(event);
    else if (!events.some((e) => e.seq === event.seq)) {
      events.push(event);
      events.sort((a, b) => a.seq - b.seq);
    } else return;
    if (events.length > MAX_EVENTS_PER_RUN) events.splice(0, events.length - MAX_EVENTS_PER_RUN);
    summarize(entry.summary, event);
    this.countWorkerLoad(event);
    if (notify) for (const listener of this.listeners) listener(entry.summary, event);
  }

  /**
   * What the console saw an actor do: for a planner its running runs and all its runs, for a worker its calls in
   * flight and all its calls (from the events of the runs in this index).
   */
  loadOf(actor: { name: string; id: string; metadata: Record<string, string> }): ActorLoad {
    if (actor.name === ServiceName.Planner) {
      const id = actor.metadata['planner_id'] ?? actor.id;
      const mine = [...this.runs.values()].filter((e) => e.summary.planner_id === id);
      return {
        in_flight: mine.filter((e) => e.summary.status === 'running').length,
        total: mine.length,
        unit: 'runs',
      };
    }
    if (actor.name === ServiceName.ToolWorker) {
      const load = this.workerLoad.get(actor.metadata['worker_id'] ?? actor.id);
      return { in_flight: load?.inFlight.size ?? 0, total: load?.calls ?? 0, unit: 'tool calls' };
    }
    return undefined;
  }

  private countWorkerLoad(event: RunEvent): void {
    if (event.type !== 'tool.started' && event.type !== 'tool.completed' && event.type !== 'tool.failed')
      return;
    let load = this.workerLoad.get(event.worker_id);
    if (load === undefined) this.workerLoad.set(event.worker_id, (load = { calls: 0, inFlight: new Set() }));
    const key = `${event.run_id}\u0000${event.call_id}`;
    if (event.type === 'tool.started') load.inFlight.add(key);
    else {
      load.inFlight.delete(key);
      load.calls++;
    }
  }

  private entry(runId: string): RunEntry {
    let entry = this.runs.get(runId);
    if (entry === undefined) {
      if (this.runs.size >= MAX_RUNS) this.runs.delete(this.runs.keys().next().value!);
      entry = {
        summary: {
          run_id: runId,
          status: 'unknown',
          task: '',
          tenant: undefined,
          session: undefined,
          planner_id: undefined,
          accepted_at: undefined,
          updated_at: new Date().toISOString(),
          iterations: 0,
          tool_calls: 0,
          last_seq: 0,
        },
        events: [],
        backfilled: false,
      };
      this.runs.set(runId, entry);
    }
    return entry;
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function summarize(s: RunSummary, event: RunEvent): void {
  s.updated_at = event.ts;
  s.last_seq = Math.max(s.last_seq, event.seq);
  const final = !['running', 'accepted', 'queued', 'unknown'].includes(s.status);
  switch (event.type) {
    case 'run.accepted':
      s.task = event.task;
      s.accepted_at = event.ts;
      s.tenant = event.identity?.tenant;
      s.session = event.identity?.session;
      if (!final) s.status = 'accepted';
      return;
    case 'run.queued':
      if (s.status === 'accepted' || s.status === 'unknown') s.status = 'queued';
      s.queue_position = event.position;
      return;
    case 'run.started':
      s.planner_id = event.planner_id;
      s.accepted_at ??= event.ts;
      s.queue_position = undefined;
      if (!final) s.status = 'running';
      return;
    case 'llm.request':
      s.iterations = Math.max(s.iterations, event.iteration);
      return;
    case 'tool.completed':
    case 'tool.failed':
      s.tool_calls++;
      return;
    case 'run.completed':
      s.status = event.status;
      return;
    case 'run.failed':
      s.status = 'failed';
      return;
    default:
      return;
  }
}
