import type { RunWaiting } from '@agentmesh/protocol';

/**
 * How a run waits, kept in its run record: `paused` while paused, `awaiting_approval` while any call waits for a
 * decision, nothing otherwise. Writes are serialized and only made when the state changes.
 */
export class WaitingState {
  private approvals = 0;
  private paused = false;
  private recorded: RunWaiting | undefined;
  private writes: Promise<void> = Promise.resolve();

  constructor(private readonly record: (waiting: RunWaiting | undefined) => Promise<void>) {}

  enterApproval(): Promise<void> {
    this.approvals++;
    return this.sync();
  }

  leaveApproval(): Promise<void> {
    this.approvals = Math.max(0, this.approvals - 1);
    return this.sync();
  }

  setPaused(paused: boolean): Promise<void> {
    this.paused = paused;
    return this.sync();
  }

  get current(): RunWaiting | undefined {
    return this.paused ? 'paused' : this.approvals > 0 ? 'awaiting_approval' : undefined;
  }

  private sync(): Promise<void> {
    this.writes = this.writes.then(async () => {
      const next = this.current;
      if (next === this.recorded) return;
      this.recorded = next;
      await this.record(next);
    });
    return this.writes;
  }
}
