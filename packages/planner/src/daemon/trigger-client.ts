import { z } from 'zod';
import {
  DEFAULT_PREFIX,
  TriggerSchema,
  requestJson,
  subjects,
  validate,
  ErrorCode,
  type Backend,
  type Bus,
  type Trigger,
} from '@agentmesh/protocol';
import { openTriggerStore } from '../infra/backend.js';
import { TriggerQueue } from './trigger-queue.js';

export const TriggerReplySchema = z.object({
  ok: z.literal(true),
  run_id: z.string(),
  seq: z.number().int(),
  depth: z.number().int(),
});
export type TriggerReply = z.infer<typeof TriggerReplySchema>;

/**
 * Queues a trigger for a daemon run and waits until a planner stored it. Fails with `not_found` (no such live
 * daemon), `queue_full`, or `no_responders` when no planner runs.
 */
export function triggerRun(
  bus: Bus,
  runId: string,
  trigger: Trigger,
  options: { prefix?: string; timeoutMs?: number } = {},
): Promise<TriggerReply> {
  validate(TriggerSchema, trigger, 'trigger', ErrorCode.InvalidRequest);
  return requestJson(
    bus,
    subjects(options.prefix ?? DEFAULT_PREFIX).runTrigger(runId),
    trigger,
    TriggerReplySchema,
    { timeoutMs: options.timeoutMs ?? 10_000, what: 'trigger reply' },
  );
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
