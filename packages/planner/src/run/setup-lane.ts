import { Semaphore } from '../util.js';

/**
 * Bounds how many runs are being set up at once (admitted, their tools loaded) so that in a burst of runs the first
 * ones reach their first model call while the later ones are still queued, instead of every run of the burst waiting
 * for the setup of all the others: one setup step of each run in turn, then the next step of each, and so on.
 *
 * A run keeps its place for at most `maxHoldMs`: a setup waiting on the network (a slow catalog, a NATS server
 * coming back) gives its place to the next run rather than holding the queue.
 */
export class SetupLane {
  private readonly places: Semaphore;

  constructor(
    width: number,
    private readonly maxHoldMs: number,
  ) {
    this.places = new Semaphore(width);
  }

  /** Waits for a place; resolves with the function that gives it up (calling it again does nothing). */
  async enter(): Promise<() => void> {
    const release = await this.places.acquire();
    const timer = setTimeout(release, this.maxHoldMs);
    timer.unref?.();
    return () => {
      clearTimeout(timer);
      release();
    };
  }
}
