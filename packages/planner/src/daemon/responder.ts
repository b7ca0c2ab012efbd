import {
  TriggerSchema,
  serve,
  type Bus,
  type Logger,
  type Subjects,
  type Subscription,
} from '@agentmesh/protocol';
import { MAX_TRIGGER_BYTES, type TriggerQueue } from './trigger-queue.js';

/**
 * Answers `runs.<run_id>.trigger` on every live planner (one queue group): validates the trigger, queues it durably
 * for the daemon, and replies `{ok, seq, depth}`, or an error (`not_found` for a run that is no live daemon,
 * `payload_too_large` above `maxBytes`, `queue_full` at capacity, `quota_exceeded` at the planner's per-daemon
 * quota, `invalid_message` naming the bad field). A plain publish gets no reply; a refusal for a
 * full queue still reaches the run as a `run.warning`.
 */
export function serveTriggers(options: {
  bus: Bus;
  subjects: Subjects;
  queue: () => Promise<TriggerQueue>;
  logger: Logger;
  /** The largest trigger body (default {@link MAX_TRIGGER_BYTES}). */
  maxBytes?: number;
}): Subscription {
  const { bus, subjects } = options;
  return serve({
    bus,
    subject: subjects.allRunTriggers,
    schema: TriggerSchema,
    what: 'trigger',
    queue: 'agentmesh-planner-triggers',
    logger: options.logger,
    maxBytes: options.maxBytes ?? MAX_TRIGGER_BYTES,
    handler: async (trigger, msg) => {
      const runId = msg.subject.split('.').at(-2)!;
      const queued = await (await options.queue()).enqueue(runId, trigger);
      options.logger.debug({ run_id: runId, kind: trigger.kind, seq: queued.seq }, 'trigger queued');
      return { ok: true, run_id: runId, ...queued };
    },
  });
}
