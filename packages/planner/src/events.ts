import { observeRunEvent, type RunEvent, type RunEventBody } from '@agentmesh/protocol';

/**
 * Stamps a run's events with run_id, a gapless seq and ts, records them and hands them on in order. A resumed run
 * starts from the last seq already published (its earlier events seed `events`).
 */
export class RunEventSink {
  readonly events: RunEvent[] = [];
  private fenced = false;
  constructor(
    readonly runId: string,
    private readonly publish: (event: RunEvent) => void,
    private readonly onEvent: ((event: RunEvent) => void) | undefined,
    private seq = 0,
    earlier: readonly RunEvent[] = [],
  ) {
    this.events.push(...earlier);
  }

  get lastSeq(): number {
    return this.seq;
  }

  /** Stops publishing: the run now belongs to another planner, whose events continue the story. */
  fence(): void {
    this.fenced = true;
  }

  emit<B extends RunEventBody>(body: B): B & { run_id: string; seq: number; ts: string } {
    const event = { ...body, run_id: this.runId, seq: ++this.seq, ts: new Date().toISOString() };
    if (this.fenced) return event;
    this.events.push(event as RunEvent);
    this.publish(event as RunEvent);
    observeRunEvent(event as RunEvent);
    if (this.onEvent) {
      try {
        this.onEvent(event as RunEvent);
      } catch {
        // an observer's failure must not break the run
      }
    }
    return event;
  }
}
