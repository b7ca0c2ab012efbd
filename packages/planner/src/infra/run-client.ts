import { randomUUID } from 'node:crypto';
import {
  AgentMeshError,
  DEFAULT_PREFIX,
  ErrorCode,
  RunRequestSchema,
  TERMINAL_EVENT_TYPES,
  validate,
  type Backend,
  type RunEvent,
  type RunRequestInput,
} from '@agentmesh/protocol';
import { followRunEvents, lastStoredEvent, publishRunRequest } from './backend.js';
import { readTranscript, settledTranscript } from './transcripts.js';
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

/** What a fork changes of the original run: its id and the model that takes over. */
export interface ForkChoice {
  /** The original run and the seq of the event the fork starts after. */
  runId: string;
  seq: number;
  /** The fork's run id (default: `fork-` and 8 random hex digits). */
  id?: string | undefined;
  provider?: RunRequestInput['provider'] | undefined;
  model?: string | undefined;
  script?: RunRequestInput['script'] | undefined;
}

/**
 * The request of a fork: the original run's request, read from its transcript, with `fork` set and the model the
 * fork chooses. A new provider drops the original's model, script and base URL; a script alone makes the fork
 * scripted; a model alone keeps the provider. The session, parent, daemon and run id are not carried. The planner that takes
 * the fork reads the conversation itself (and refuses another tenant's run); this only names what to fork.
 */
export async function forkRequest(
  bus: Backend,
  choice: ForkChoice,
  options: { prefix?: string } = {},
): Promise<RunRequestInput & { id: string }> {
  const transcript = await settledTranscript(
    () => readTranscript(bus, choice.runId, options),
    async () =>
      TERMINAL_EVENT_TYPES.has((await lastStoredEvent(bus, choice.runId, options.prefix))?.type ?? ''),
  );
  if (transcript === null)
    throw new AgentMeshError(
      ErrorCode.NotFound,
      `run ${choice.runId} has no stored transcript (it is unknown, still running, or its transcript expired): ` +
        'only a finished run can be forked',
      { retryable: false, details: { run_id: choice.runId } },
    );
  const original = validate(RunRequestSchema, transcript.request, `the request of run ${choice.runId}`);
  const {
    id: _id,
    session: _session,
    parent: _parent,
    fork: _fork,
    daemon: _daemon,
    provider,
    model,
    script,
    base_url: baseUrl,
    identity,
    ...kept
  } = original;
  const switched = choice.provider !== undefined || choice.script !== undefined;
  const nextProvider = choice.provider ?? (choice.script !== undefined ? 'scripted' : provider);
  const nextModel = choice.model ?? (switched ? undefined : model);
  const nextScript =
    choice.script ?? (choice.provider === undefined || choice.provider === 'scripted' ? script : undefined);
  const { session: _identitySession, ...who } = identity ?? { tenant: 'default' };
  return {
    ...kept,
    id: choice.id ?? `fork-${randomUUID().slice(0, 8)}`,
    ...(nextProvider === undefined ? {} : { provider: nextProvider }),
    ...(nextModel === undefined ? {} : { model: nextModel }),
    ...(nextScript === undefined ? {} : { script: nextScript }),
    ...(switched || baseUrl === undefined ? {} : { base_url: baseUrl }),
    ...(identity === undefined ? {} : { identity: who }),
    fork: { run_id: choice.runId, seq: choice.seq },
  };
}
