import type { RunRequest } from '@agentmesh/protocol';
import type { RunSnapshot } from '../model/snapshot.js';
import { DaemonSession, type DaemonInputSource } from './daemon-session.js';
import type { IdleDaemons } from './idle-daemons.js';
import type { TriggerQueue } from './trigger-queue.js';

export {
  DaemonSession,
  DAEMON_COMPACT_TOKENS,
  type DaemonInputSource,
  type DaemonState,
} from './daemon-session.js';
export {
  TriggerQueue,
  DEFAULT_MAX_PENDING_TRIGGERS,
  MAX_TRIGGER_BYTES,
  TRIGGERS_STORE_MAX_BYTES,
  type QueuedTrigger,
  type TriggerLimits,
} from './trigger-queue.js';
export { serveTriggers } from './responder.js';
export { IdleDaemons } from './idle-daemons.js';
export { WatchAnnouncer, WATCH_ANNOUNCE_MS } from './watch-announcer.js';

export { DAEMON_TIMEOUT_MS } from '../run/setup.js';

/** The daemon session of a daemon run (its queue opened), or undefined for any other run. */
export async function daemonSession(
  request: RunRequest,
  snapshot: RunSnapshot,
  queue: (() => Promise<TriggerQueue>) | undefined,
  hooks: { input?: DaemonInputSource; idle?: IdleDaemons; compactTokens?: number } = {},
): Promise<DaemonSession | undefined> {
  if (request.daemon === undefined || queue === undefined) return undefined;
  const triggers = await queue();
  const capacity = request.daemon.queue_capacity ?? 1000;
  const options = {
    wake_interval_ms: request.daemon.wake_interval_ms ?? 0,
    idle_watchdog: request.daemon.idle_watchdog ?? 0,
    // what the daemon may hold: its capacity, within this planner's quota (the run.warning names it)
    queue_capacity: Math.min(capacity, triggers.maxPending),
    watch_paths: request.daemon.watch_paths ?? [],
  };
  await triggers.open(snapshot.run_id, capacity);
  const state = (snapshot.daemon ??= { idle: false, handled: 0, idle_ticks: 0, dropped_reported: 0 });
  return new DaemonSession(options, state, triggers, hooks);
}
export { triggerRun, daemonStatuses, TriggerReplySchema, type TriggerReply } from './trigger-client.js';
