import type { CatalogAvailability } from '@agentmesh/protocol';

/** Per worker, the tools it says cannot run now (an MCP server reconnecting); every replica hears the notices. */
export class ToolAvailability {
  private readonly unavailable = new Map<string, Set<string>>();

  /** Applies a worker's notice. */
  apply(notice: CatalogAvailability): void {
    const down = this.unavailable.get(notice.worker_id) ?? new Set<string>();
    for (const name of notice.tools) {
      if (notice.available) down.delete(name);
      else down.add(name);
    }
    if (down.size === 0) this.unavailable.delete(notice.worker_id);
    else this.unavailable.set(notice.worker_id, down);
  }

  /** Forgets a worker (it deregistered). */
  forget(workerId: string): void {
    this.unavailable.delete(workerId);
  }

  /** Whether some live worker of the tool can run it now. */
  isAvailable(name: string, workers: readonly string[]): boolean {
    return this.unavailable.size === 0 || workers.some((w) => this.unavailable.get(w)?.has(name) !== true);
  }
}
