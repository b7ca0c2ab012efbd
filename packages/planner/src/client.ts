import { randomUUID } from 'node:crypto';
import {
  AgentMeshError,
  DEFAULT_PREFIX,
  ErrorCode,
  RunEventSchema,
  TERMINAL_EVENT_TYPES,
  createEnvelope,
  encodeJson,
  envelopeToHeaders,
  openRunEventLog,
  openRunIntake,
  requestJson,
  subjects,
  validate,
  type Backend,
  type EventFollower,
  type RunEvent,
  type RunRequestInput,
} from '@agentmesh/protocol';
import { z } from 'zod';
import type { RunResult } from './planner.js';

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
export async function submitRun(
  bus: Backend,
  request: RunRequestInput,
  options: { prefix?: string } = {},
): Promise<SubmitResult> {
  const s = subjects(options.prefix ?? DEFAULT_PREFIX);
  const body = { ...request, id: request.id ?? `run-${randomUUID()}` };
  if (bus.durable) {
    const intake = await openRunIntake(bus, options.prefix ?? DEFAULT_PREFIX);
    const ack = await intake.submit(encodeJson(body), {
      dedupeId: body.id,
      headers: envelopeToHeaders(
        createEnvelope(
          request.identity
            ? { ...request.identity, tenant: request.identity.tenant ?? 'default' }
            : undefined,
        ),
      ),
    });
    return { run_id: body.id, seq: ack.seq, duplicate: ack.duplicate };
  }
  const reply = await requestJson(bus, s.runsSubmit, body, z.object({ run_id: z.string() }), {
    timeoutMs: 10_000,
  });
  return { run_id: reply.run_id };
}

/**
 * Follows a run's events until its final event and returns that. On NATS it reads the events stream from the start
 * (so it may be called after submitting); in process it subscribes, so call it before submitting.
 */
export function followRun(
  bus: Backend,
  runId: string,
  options: { prefix?: string; onEvent?: (event: RunEvent) => void; signal?: AbortSignal } = {},
): Promise<RunResult> {
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  const subject = subjects(prefix).runEvents(runId);
  const handle = (data: unknown): RunResult | undefined => {
    const event = validate(RunEventSchema, data, 'run event');
    options.onEvent?.(event);
    return TERMINAL_EVENT_TYPES.has(event.type) ? (event as RunResult) : undefined;
  };
  if (!bus.durable) {
    return new Promise((resolve, reject) => {
      const sub = bus.subscribe(subject, (msg) => {
        const final = handle(JSON.parse(msg.text()));
        if (final) {
          sub.unsubscribe();
          resolve(final);
        }
      });
      options.signal?.addEventListener(
        'abort',
        () => {
          sub.unsubscribe();
          reject(new AgentMeshError(ErrorCode.Cancelled, `stopped following run ${runId}`));
        },
        { once: true },
      );
    });
  }
  return new Promise<RunResult>((resolve, reject) => {
    let settled = false;
    let follower: EventFollower | undefined;
    const finish = (outcome: () => void) => {
      if (settled) return;
      settled = true;
      options.signal?.removeEventListener('abort', onAbort);
      void follower?.stop();
      outcome();
    };
    const onAbort = () =>
      finish(() => reject(new AgentMeshError(ErrorCode.Cancelled, `stopped following run ${runId}`)));
    options.signal?.addEventListener('abort', onAbort, { once: true });
    openRunEventLog(bus, prefix)
      .then((log) =>
        log.follow(subject, (e) => {
          if (settled) return;
          try {
            const final = handle(JSON.parse(new TextDecoder().decode(e.data)));
            if (final) finish(() => resolve(final));
          } catch (error) {
            finish(() => reject(error as Error));
          }
        }),
      )
      .then((f) => {
        follower = f;
        if (settled) void f.stop();
      })
      .catch((error: unknown) => finish(() => reject(error as Error)));
  });
}
