/**
 * Waiting in tests: on a run's events as they are appended (`waitForRunEvent`), or, for state that has no event (a
 * KV record, a catalog's table), on a condition checked again until it holds (`until`).
 */
import type { Backend, RunEvent } from '@agentmesh/protocol';
import { followRun } from '@agentmesh/planner';

/** Resolves with the first value `check` returns that is not undefined or false; rejects naming `what` on timeout. */
export async function until<T>(
  what: string,
  check: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * Follows a run's event log from its first event and resolves with the first event `match` accepts. Rejects when
 * the run ends without one, or after `timeoutMs`.
 */
export async function waitForRunEvent<T extends RunEvent = RunEvent>(
  backend: Backend,
  runId: string,
  match: ((e: RunEvent) => e is T) | ((e: RunEvent) => boolean),
  options: { prefix: string; timeoutMs?: number; what?: string },
): Promise<T> {
  const what = options.what ?? `an event of ${runId}`;
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), options.timeoutMs ?? 30_000);
  let found: T | undefined;
  try {
    await followRun(backend, runId, {
      prefix: options.prefix,
      signal: controller.signal,
      onEvent: (event) => {
        if (found === undefined && match(event)) {
          found = event as T;
          controller.abort();
        }
      },
    });
  } catch (error) {
    if (found === undefined && !controller.signal.aborted) throw error;
  } finally {
    clearTimeout(timer);
  }
  if (found === undefined) {
    throw new Error(
      controller.signal.aborted ? `timed out waiting for ${what}` : `${runId} ended without ${what}`,
    );
  }
  return found;
}

/** The run's final event (`run.completed` or `run.failed`), followed from its event log. */
export function waitForRunEnd(
  backend: Backend,
  runId: string,
  options: { prefix: string; timeoutMs?: number },
): Promise<RunEvent> {
  return waitForRunEvent(backend, runId, (e) => e.type === 'run.completed' || e.type === 'run.failed', {
    ...options,
    what: `the end of ${runId}`,
  });
}

/**
 * The run events a test has seen (fed from a subscription to every run's events), with waits that check again on
 * each event that arrives, and every `pollMs` for state that changes without one.
 */
export class EventBoard {
  private readonly events = new Map<string, RunEvent[]>();
  private readonly listeners = new Set<() => void>();

  /** Records an event and wakes the waits. */
  add(event: RunEvent): void {
    const list = this.events.get(event.run_id);
    if (list) list.push(event);
    else this.events.set(event.run_id, [event]);
    for (const listener of [...this.listeners]) listener();
  }

  of(runId: string): readonly RunEvent[] {
    return this.events.get(runId) ?? [];
  }

  /** Resolves with `check()` once it is defined; rejects naming `what` after `timeoutMs`. */
  until<T>(
    what: string,
    check: () => T | undefined,
    options: { timeoutMs?: number; pollMs?: number } = {},
  ): Promise<T> {
    return new Promise((resolve, reject) => {
      const listener = () => {
        const value = check();
        if (value === undefined) return;
        done();
        resolve(value);
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`timed out waiting for ${what}`));
      }, options.timeoutMs ?? 30_000);
      const poll = options.pollMs === undefined ? undefined : setInterval(listener, options.pollMs);
      const done = () => {
        clearTimeout(timer);
        clearInterval(poll);
        this.listeners.delete(listener);
      };
      this.listeners.add(listener);
      listener();
    });
  }
}

/**
 * True once a daemon's first wake asked the model (`llm.request` after `daemon.woken`): `daemon.woken` is published as
 * soon as the wake is checkpointed, and its trigger leaves the queue between the two.
 */
export function firstWakeOffQueue(events: readonly RunEvent[]): true | undefined {
  const woken = events.findIndex((e) => e.type === 'daemon.woken');
  return woken >= 0 && events.slice(woken).some((e) => e.type === 'llm.request') ? true : undefined;
}
