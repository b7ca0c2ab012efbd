/**
 * The daemons of one planner that are idle now. A draining planner does not wait for them: an idle daemon has
 * nothing in flight, its checkpoint says where it stands, and once this planner is gone its lease runs out and
 * another planner resumes it (still idle, its queue intact).
 */
export class IdleDaemons {
  private readonly idle = new Set<string>();
  private readonly listeners = new Set<() => void>();

  get size(): number {
    return this.idle.size;
  }

  has(runId: string): boolean {
    return this.idle.has(runId);
  }

  set(runId: string, idle: boolean): void {
    if (idle) this.idle.add(runId);
    else this.idle.delete(runId);
    for (const listener of [...this.listeners]) listener();
  }

  /** Resolves at the next change. */
  changed(): Promise<void> {
    return new Promise((resolve) => {
      const listener = () => {
        this.listeners.delete(listener);
        resolve();
      };
      this.listeners.add(listener);
    });
  }
}
