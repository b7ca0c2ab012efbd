import {
  TriggerSchema,
  serve,
  type Bus,
  type Logger,
  type Subjects,
  type Subscription,
} from '@agentmesh/protocol';
import type { ControlLedger } from '../infra/control-ledger.js';
import { MAX_TRIGGER_BYTES, type TriggerQueue } from './trigger-queue.js';

/** Bytes a `"request_id": "…"` field of at most 128 characters adds to a trigger's JSON. */
const REQUEST_ID_ROOM = 160;

/**
 * Answers `runs.<run_id>.trigger` on every live planner (one queue group): validates the trigger, queues it durably
 * for the daemon, and replies `{ok, seq, depth}` (a repeat of a `request_id` already queued: the first reply with
 * `duplicate: true`, when the planner has a `ledger`), or an error (`not_found` for a run that is no live daemon,
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
  /** Where request ids and their outcomes are kept (absent: every trigger is queued). */
  ledger?: ControlLedger | undefined;
}): Subscription {
  const { bus, subjects } = options;
  return serve({
    bus,
    subject: subjects.allRunTriggers,
    schema: TriggerSchema,
    what: 'trigger',
    queue: 'agentmesh-planner-triggers',
    logger: options.logger,
    // a coarse guard before parsing: the queue refuses a trigger above the limit by its size without request_id
    maxBytes: 4 * (options.maxBytes ?? MAX_TRIGGER_BYTES) + REQUEST_ID_ROOM,
    handler: async (trigger, msg) => {
      const runId = msg.subject.split('.').at(-2)!;
      const { request_id: _requestId, ...payload } = trigger;
      const enqueue = async () => (await options.queue()).enqueue(runId, payload, trigger.request_id);
      if (trigger.request_id === undefined || options.ledger === undefined) {
        const queued = await enqueue();
        options.logger.debug({ run_id: runId, kind: trigger.kind, seq: queued.seq }, 'trigger queued');
        return { ok: true, run_id: runId, ...queued };
      }
      const { outcome, duplicate } = await options.ledger.once(
        runId,
        trigger.request_id,
        'trigger',
        {},
        enqueue,
      );
      options.logger.debug({ run_id: runId, kind: trigger.kind, duplicate, ...outcome }, 'trigger queued');
      return { ok: true, run_id: runId, ...outcome, ...(duplicate ? { duplicate } : {}) };
    },
  });
}
