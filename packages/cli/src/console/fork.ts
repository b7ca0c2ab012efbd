import {
  ProviderKindSchema,
  RunIdSchema,
  ScriptedTurnSchema,
  describeZodError,
  type Backend,
} from '@agentmesh/protocol';
import { forkRequest, submitRun, type SubmitResult } from '@agentmesh/planner';
import { z } from 'zod';
import { HttpError } from './guard.js';

/** The body of `POST /api/runs/<id>/fork`: where to fork, and the model that takes over (default the original's). */
export const ConsoleForkSchema = z
  .object({
    seq: z.number().int().min(1),
    id: RunIdSchema.optional(),
    provider: ProviderKindSchema.optional(),
    model: z.string().min(1).max(256).optional(),
    script: z.array(ScriptedTurnSchema).min(1).optional(),
  })
  .strict();

/**
 * Starts a fork of `runId` from the console: the body is checked here, the original's request is read from its
 * transcript, and the planner that takes the fork checks the fork point (and the tenant) itself.
 */
export async function forkFromConsole(
  bus: Backend,
  prefix: string,
  runId: string,
  body: unknown,
): Promise<SubmitResult & { forked_from: { run_id: string; seq: number } }> {
  const parsed = ConsoleForkSchema.safeParse(body);
  if (!parsed.success) throw new HttpError(400, `invalid fork: ${describeZodError(parsed.error)}`);
  const { seq, ...choice } = parsed.data;
  const request = await forkRequest(bus, { runId, seq, ...choice }, { prefix });
  const submitted = await submitRun(bus, request, { prefix });
  return { ...submitted, forked_from: { run_id: runId, seq } };
}
