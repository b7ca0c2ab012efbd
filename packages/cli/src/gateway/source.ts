import {
  AgentMeshError,
  ErrorCode,
  RunEventSchema,
  openRunEventLog,
  subjects,
  type Backend,
  type EventLog,
  type LoggedEvent,
  type RunEvent,
} from '@agentmesh/protocol';
import { listRuns, readRunRecord, type RunRecord } from '@agentmesh/planner';
import type { RunIndex } from '../console/run-index.js';
import type { GatewayRun } from './schemas.js';

/** Stops a follow; events may still arrive until the returned promise settles (callers drop them by seq). */
export type StopFollow = () => Promise<void>;

export interface RunListFilter {
  tenant: string;
  status?: string | undefined;
  session?: string | undefined;
  limit: number;
}

/**
 * Where the gateway reads runs from: on NATS the run records and the JetStream event log (nothing kept in the
 * gateway, so replicas need no shared state), embedded the in-process run index.
 */
export interface RunSource {
  /** The run as the API shows it, or undefined for an unknown run id. */
  get(runId: string): Promise<GatewayRun | undefined>;
  list(filter: RunListFilter): Promise<GatewayRun[]>;
  /** The run's tenant (cheaper than `get`: no run record), or undefined for an unknown run id. */
  tenant(runId: string): Promise<string | undefined>;
  /** Tells the source a run's first event seen elsewhere (the submit saw it), sparing a read later. */
  learn(event: RunEvent): void;
  /** Delivers the run's events with seq >= `fromSeq` in order, stored ones first, then live ones. */
  follow(runId: string, fromSeq: number, onEvent: (event: RunEvent) => void): Promise<StopFollow>;
}

/** What the first event of a run (`run.accepted`) says about it: it never changes, so it is cached. */
interface Accepted {
  /** The event itself: a stream from seq 1 starts with it at once, while its follower on the log is made. */
  event: RunEvent;
  tenant: string;
  session: string | undefined;
  task: string;
}

const MAX_CACHED = 10_000;
/** How many of the newest runs a list looks at, at most, and how many at a time. */
const LIST_SCAN = 2_000;
const LIST_BATCH = 32;

function acceptedOf(event: RunEvent): Accepted {
  return event.type === 'run.accepted'
    ? {
        event,
        tenant: event.identity?.tenant ?? 'default',
        session: event.identity?.session,
        task: event.task,
      }
    : { event, tenant: 'default', session: undefined, task: '' };
}

function recordStatus(record: RunRecord): string {
  if (record.state === 'finished') return record.status ?? 'finished';
  return record.waiting ?? 'running';
}

/** Runs of a NATS fleet: records from the runs bucket, events from the JetStream event log. */
export class NatsRunSource implements RunSource {
  private readonly accepted = new Map<string, Accepted>();
  private log: Promise<EventLog> | undefined;

  constructor(
    private readonly bus: Backend,
    private readonly prefix: string,
  ) {}

  async get(runId: string): Promise<GatewayRun | undefined> {
    const [record, accepted] = await Promise.all([
      readRunRecord(this.bus, runId, { prefix: this.prefix }),
      this.acceptedOf(runId),
    ]);
    if (accepted === undefined) return undefined;
    return this.view(runId, accepted, record);
  }

  async tenant(runId: string): Promise<string | undefined> {
    return (await this.acceptedOf(runId))?.tenant;
  }

  learn(event: RunEvent): void {
    if (event.seq === 1) this.remember(event.run_id, acceptedOf(event));
  }

  /**
   * The newest runs that match, looked at in batches (each run's tenant is read once, then cached) until `limit`
   * matched or {@link LIST_SCAN} runs were looked at.
   */
  async list(filter: RunListFilter): Promise<GatewayRun[]> {
    const records = await listRuns(this.bus, { prefix: this.prefix, limit: LIST_SCAN });
    const found: GatewayRun[] = [];
    for (let at = 0; at < records.length && found.length < filter.limit; at += LIST_BATCH) {
      const batch = await Promise.all(
        records.slice(at, at + LIST_BATCH).map(async (record) => {
          const accepted = await this.acceptedOf(record.run_id);
          return accepted === undefined ? undefined : this.view(record.run_id, accepted, record);
        }),
      );
      found.push(...batch.filter((run): run is GatewayRun => run !== undefined && matches(run, filter)));
    }
    return found.slice(0, filter.limit);
  }

  async follow(runId: string, fromSeq: number, onEvent: (event: RunEvent) => void): Promise<StopFollow> {
    let from = fromSeq;
    const first = from <= 1 ? this.accepted.get(runId)?.event : undefined;
    if (first !== undefined) {
      onEvent(first);
      from = 2;
    }
    const log = await this.eventLog();
    const follower = await log.follow(
      subjects(this.prefix).runEvents(runId),
      (stored) => onEvent(RunEventSchema.parse(JSON.parse(Buffer.from(stored.data).toString('utf8')))),
      { fromSeq: from },
    );
    return () => follower.stop();
  }

  private view(runId: string, accepted: Accepted, record: RunRecord | null): GatewayRun {
    return {
      run_id: runId,
      tenant: accepted.tenant,
      ...(accepted.session === undefined ? {} : { session: accepted.session }),
      task: accepted.task,
      status: record === null ? 'accepted' : recordStatus(record),
      ...(record?.accepted_at === undefined ? {} : { accepted_at: record.accepted_at }),
      ...(record?.finished_at === undefined ? {} : { finished_at: record.finished_at }),
      ...(record?.planner_id === undefined ? {} : { planner_id: record.planner_id }),
      ...(record?.waiting === undefined ? {} : { waiting: record.waiting }),
    };
  }

  /** The run's `run.accepted` facts, read once from the event log (undefined while the run has no event). */
  private async acceptedOf(runId: string): Promise<Accepted | undefined> {
    const known = this.accepted.get(runId);
    if (known !== undefined) return known;
    const log = await this.eventLog();
    const subject = subjects(this.prefix).runEvents(runId);
    if ((await log.last(subject)) === undefined) return undefined;
    const first = await firstStored(log, subject);
    const accepted = acceptedOf(RunEventSchema.parse(JSON.parse(Buffer.from(first.data).toString('utf8'))));
    this.remember(runId, accepted);
    return accepted;
  }

  private remember(runId: string, accepted: Accepted): void {
    if (this.accepted.size >= MAX_CACHED) this.accepted.delete(this.accepted.keys().next().value!);
    this.accepted.set(runId, accepted);
  }

  private eventLog(): Promise<EventLog> {
    this.log ??= openRunEventLog(this.bus, this.prefix);
    return this.log;
  }
}

/** The first stored event of a subject known to have one (a follower stopped after one event, not a replay). */
async function firstStored(log: EventLog, subject: string): Promise<LoggedEvent> {
  let got!: (event: LoggedEvent) => void;
  const first = new Promise<LoggedEvent>((resolve) => (got = resolve));
  const follower = await log.follow(subject, (event) => got(event), { fromSeq: 1 });
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(
      () =>
        reject(new AgentMeshError(ErrorCode.Timeout, `the first event of ${subject} did not arrive in 5 s`)),
      5_000,
    );
  });
  try {
    return await Promise.race([first, timeout]);
  } finally {
    clearTimeout(timer);
    await follower.stop();
  }
}

function matches(run: GatewayRun, filter: RunListFilter): boolean {
  return (
    run.tenant === filter.tenant &&
    (filter.status === undefined || run.status === filter.status) &&
    (filter.session === undefined || run.session === filter.session)
  );
}

/** Runs of the embedded mesh, from the in-process run index (which keeps their events). */
export class IndexRunSource implements RunSource {
  constructor(private readonly index: RunIndex) {}

  async get(runId: string): Promise<GatewayRun | undefined> {
    const found = await this.index.get(runId);
    if (found === undefined || found.events.length === 0) return undefined;
    const s = found.summary;
    return {
      run_id: s.run_id,
      tenant: s.tenant ?? 'default',
      ...(s.session === undefined ? {} : { session: s.session }),
      task: s.task,
      status: s.status,
      ...(s.accepted_at === undefined ? {} : { accepted_at: s.accepted_at }),
      ...(s.planner_id === undefined ? {} : { planner_id: s.planner_id }),
    };
  }

  async tenant(runId: string): Promise<string | undefined> {
    return (await this.get(runId))?.tenant;
  }

  learn(): void {}

  async list(filter: RunListFilter): Promise<GatewayRun[]> {
    const summaries = this.index.list({
      tenant: filter.tenant,
      status: filter.status,
      session: filter.session,
    });
    const runs = await Promise.all(summaries.map((s) => this.get(s.run_id)));
    return runs.filter((run): run is GatewayRun => run !== undefined).slice(0, filter.limit);
  }

  async follow(runId: string, fromSeq: number, onEvent: (event: RunEvent) => void): Promise<StopFollow> {
    let next = fromSeq;
    const deliver = (event: RunEvent) => {
      if (event.run_id !== runId || event.seq < next) return;
      next = event.seq + 1;
      onEvent(event);
    };
    let stopped = false;
    let early: RunEvent[] | undefined = [];
    const off = this.index.onUpdate((_summary, event) => {
      if (event === undefined || stopped) return;
      if (early !== undefined) early.push(event);
      else deliver(event);
    });
    for (const event of (await this.index.get(runId))?.events ?? []) if (!stopped) deliver(event);
    for (const event of early) if (!stopped) deliver(event);
    early = undefined;
    return () => {
      stopped = true;
      off();
      return Promise.resolve();
    };
  }
}
