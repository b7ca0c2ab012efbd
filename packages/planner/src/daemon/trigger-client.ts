import { z } from 'zod';
import {
  DEFAULT_PREFIX,
  TriggerSchema,
  newRequestId,
  requestControl,
  validate,
  ErrorCode,
  type Backend,
  type Bus,
  type Trigger,
  runControlSubject,
  type ControlSendOptions,
} from '@agentmesh/protocol';
import { openTriggerStore } from '../infra/backend.js';
import { TriggerQueue } from './trigger-queue.js';

export const TriggerReplySchema = z.object({
  ok: z.literal(true),
  run_id: z.string(),
  seq: z.number().int(),
  depth: z.number().int(),
  duplicate: z.boolean().optional(),
});
export type TriggerReply = z.infer<typeof TriggerReplySchema>;

/**
 * Queues a trigger for a daemon run and waits until a planner stored it, with a `request_id` (generated when the
 * trigger has none), sending again on `timeout` or `no_responders` within the deadline (`timeoutMs`, default 10 s):
 * a repeat is answered with the first reply and `duplicate: true`. Fails with `not_found` (no such live daemon),
 * `queue_full`, or `no_responders` when no planner runs.
 */
export async function triggerRun(
  bus: Bus,
  runId: string,
  trigger: Trigger,
  options: ControlSendOptions = {},
): Promise<TriggerReply & { request_id: string; attempts: number }> {
  validate(TriggerSchema, trigger, 'trigger', ErrorCode.InvalidRequest);
  const body = { ...trigger, request_id: trigger.request_id ?? newRequestId() };
  const { reply, attempts } = await requestControl(
    bus,
    runControlSubject(runId, 'trigger', options),
    body,
    TriggerReplySchema,
    { ...options, what: 'trigger reply' },
  );
  return { ...reply, request_id: body.request_id, attempts };
}

/** The state (idle, active) and queue depth of the daemon runs among `runIds`; other runs are left out. */
export async function daemonStatuses(
  bus: Backend,
  runIds: readonly string[],
  options: { prefix?: string } = {},
): Promise<Map<string, { state: 'idle' | 'active'; depth: number }>> {
  const queue = new TriggerQueue(await openTriggerStore(bus, options.prefix ?? DEFAULT_PREFIX));
  const out = new Map<string, { state: 'idle' | 'active'; depth: number }>();
  for (const runId of runIds) {
    const status = await queue.status(runId);
    if (status !== undefined) out.set(runId, status);
  }
  return out;
}
