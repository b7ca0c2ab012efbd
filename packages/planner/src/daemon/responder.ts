import {
  TriggerSchema,
  serve,
  type Bus,
  type Logger,
  type Subjects,
  type Subscription,
} from '@agentmesh/protocol';
import type { TriggerQueue } from './trigger-queue.js';

/** Triggers are small: a kind and a payload. */
export const MAX_TRIGGER_BYTES = 64 * 1024;

/**
 * Answers `runs.<run_id>.trigger` on every live planner (one queue group): validates the trigger, queues it durably
 * for the daemon, and replies `{ok, seq, depth}`, or an error (`not_found` for a run that is no live daemon,
 * `queue_full` at capacity, `invalid_message` naming the bad field). A plain publish gets no reply; a refusal for a
 * full queue still reaches the run as a `run.warning`.
 */
export function serveTriggers(options: {
  bus: Bus;
  subjects: Subjects;
  queue: () => Promise<TriggerQueue>;
  logger: Logger;
}): Subscription {
  const { bus, subjects } = options;
  return serve({
    bus,
    subject: subjects.allRunTriggers,
    schema: TriggerSchema,
    what: 'trigger',
    queue: 'agentmesh-planner-triggers',
    logger: options.logger,
    maxBytes: MAX_TRIGGER_BYTES,
    handler: async (trigger, msg) => {
      const runId = msg.subject.split('.').at(-2)!;
      const queued = await (await options.queue()).enqueue(runId, trigger);
      options.logger.debug({ run_id: runId, kind: trigger.kind, seq: queued.seq }, 'trigger queued');
      return { ok: true, run_id: runId, ...queued };
    },
  });
}
