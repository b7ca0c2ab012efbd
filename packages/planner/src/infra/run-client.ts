import { randomUUID } from 'node:crypto';
import { DEFAULT_PREFIX, type Backend, type RunEvent, type RunRequestInput } from '@agentmesh/protocol';
import { followRunEvents, publishRunRequest } from './backend.js';
import type { RunResult } from '../model/result.js';

export interface SubmitResult {
  run_id: string;
  /** Stream sequence of the request (NATS). */
  seq?: number;
  /** The server dropped it as a resubmission of the same run id (NATS dedup window). */
  duplicate?: boolean;
}

/**
 * Submits a run to whatever planners listen: on NATS into the runs stream with `Nats-Msg-Id` set to the run id (so
 * a resubmission is dropped by the server), in process through `runs.submit`. A missing id is generated.
 */
export function submitRun(
  bus: Backend,
  request: RunRequestInput,
  options: { prefix?: string } = {},
): Promise<SubmitResult> {
  const body = { ...request, id: request.id ?? `run-${randomUUID()}` };
  return publishRunRequest(bus, options.prefix ?? DEFAULT_PREFIX, body);
}

/**
 * Follows a run's events until its final event and returns that. On NATS it reads the events stream from the start
 * (so it may be called after submitting); in process it subscribes, so call it before submitting.
 */
export async function followRun(
  bus: Backend,
  runId: string,
  options: { prefix?: string; onEvent?: (event: RunEvent) => void; signal?: AbortSignal } = {},
): Promise<RunResult> {
  const final = await followRunEvents(bus, runId, {
    prefix: options.prefix ?? DEFAULT_PREFIX,
    onEvent: options.onEvent,
    signal: options.signal,
  });
  return final as RunResult;
}
