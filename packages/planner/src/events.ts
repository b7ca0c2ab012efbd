import type { RunEvent, RunEventBody } from '@agentmesh/protocol';

/** Stamps a run's events with run_id, a gapless seq from 1 and ts, records them and hands them on in order. */
export class RunEventSink {
  readonly events: RunEvent[] = [];
  constructor(
    readonly runId: string,
    private readonly publish: (event: RunEvent) => void,
    private readonly onEvent: ((event: RunEvent) => void) | undefined,
    private seq = 0,
  ) {}

  get lastSeq(): number {
    return this.seq;
  }

  emit<B extends RunEventBody>(body: B): B & { run_id: string; seq: number; ts: string } {
    const event = { ...body, run_id: this.runId, seq: ++this.seq, ts: new Date().toISOString() };
    this.events.push(event as RunEvent);
    this.publish(event as RunEvent);
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
