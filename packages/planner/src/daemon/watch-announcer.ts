import { encodeJson, subjects, type Bus, type DaemonWatch, type Logger } from '@agentmesh/protocol';

/** How often a daemon's planner repeats its `watch_paths` announcement; workers stop after three missed ones. */
export const WATCH_ANNOUNCE_MS = 5_000;

/**
 * Announces on `daemons.watch` that a daemon wants its `watch_paths` watched, again every
 * {@link WATCH_ANNOUNCE_MS} (so a worker that starts later, or a planner that resumes the daemon, picks it up), and
 * `ttl_ms: 0` when the daemon ends. A planner that dies just stops announcing: the workers' watches run out.
 */
export class WatchAnnouncer {
  private timer: NodeJS.Timeout | undefined;
  private announced = false;

  constructor(
    private readonly bus: Bus,
    private readonly prefix: string,
    private readonly watch: { runId: string; paths: readonly string[] },
    private readonly log: Logger,
  ) {}

  get running(): boolean {
    return this.timer !== undefined;
  }

  /** Announces now and every interval until {@link stop}, {@link halt} or the signal aborts. */
  start(signal: AbortSignal): void {
    if (this.timer !== undefined || signal.aborted) return;
    this.announced = true;
    this.announce(WATCH_ANNOUNCE_MS * 3);
    this.timer = setInterval(() => this.announce(WATCH_ANNOUNCE_MS * 3), WATCH_ANNOUNCE_MS);
    this.timer.unref();
    signal.addEventListener('abort', () => this.halt(), { once: true });
  }

  /** Stops announcing (the watches run out on their own: the run moved to another planner). */
  halt(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** The daemon ended: stops announcing and tells the workers to stop watching now. */
  stop(): void {
    this.halt();
    if (this.announced) this.announce(0);
  }

  private announce(ttlMs: number): void {
    const body: DaemonWatch = { run_id: this.watch.runId, paths: [...this.watch.paths], ttl_ms: ttlMs };
    try {
      this.bus.publish(subjects(this.prefix).daemonWatch, encodeJson(body));
    } catch (error) {
      this.log.warn({ run_id: this.watch.runId, err: (error as Error).message }, 'watch_paths not announced');
    }
  }
}
