import {
  ServiceName,
  backoffDelay,
  respondError,
  respondJson,
  sleep,
  subjects as buildSubjects,
  type Backend,
  type BusMessage,
  type Logger,
  type WorkItem,
  type WorkPull,
  type WorkQueue,
  type AgentMeshError,
} from '@agentmesh/protocol';
import type { Semaphore } from '../util.js';

/** What the planner does with an intake delivery once it has handled it. */
export type Settlement = { kind: 'ack' } | { kind: 'nak'; delayMs: number } | { kind: 'leave' };

/** One run request taken from the intake. */
export interface IntakeDelivery {
  readonly text: string;
  /** Envelope headers (identity), when the transport carries them. */
  readonly headers: Record<string, string> | undefined;
  /** The intake's sequence number (durable intake only). */
  readonly streamSeq: number | undefined;
  /** Set when the run waited in the fair intake: the seq of the last event stored for it then (`run.queued`). */
  readonly queuedSeq?: number | undefined;
  /** Tells the submitter the run is accepted (in-process intake answers `{ run_id }`). */
  accepted(runId: string): void;
  /** Tells the submitter the request is refused. */
  refused(error: AgentMeshError): void;
  /** Keeps the request from being redelivered while its run goes on. */
  working(): void;
  settle(settlement: Settlement): Promise<void>;
}

export interface IntakeOptions {
  slots: Semaphore;
  /** How long an unacknowledged request stays with this planner before it is redelivered. */
  leaseMs: number;
  onDelivery: (delivery: IntakeDelivery) => Promise<void>;
}

/** How long one pull waits for a request before it asks again. */
const PULL_EXPIRES_MS = 2_000;

/** The intake of a backend that is not durable: `runs.submit` requests answered with `{ run_id }`. */
export async function startBusIntake(
  backend: Backend,
  prefix: string,
  options: IntakeOptions,
): Promise<() => Promise<void>> {
  let stopping = false;
  const sub = backend.subscribe(buildSubjects(prefix).runsSubmit, (msg: BusMessage) => {
    if (stopping) return;
    const delivery: IntakeDelivery = {
      text: msg.text(),
      headers: undefined,
      streamSeq: undefined,
      accepted: (runId) => {
        if (msg.reply !== undefined) respondJson(backend, msg, { run_id: runId });
      },
      refused: (error) => respondError(backend, msg, error),
      working: () => undefined,
      settle: async () => undefined,
    };
    void (async () => {
      const release = await options.slots.acquire();
      try {
        await options.onDelivery(delivery);
      } finally {
        release();
      }
    })();
  });
  return async () => {
    stopping = true;
    sub.unsubscribe();
  };
}

/** A delivery of the durable intake; `queuedSeq` for a run that waited in the fair intake. */
export function queueDelivery(item: WorkItem, queuedSeq?: number): IntakeDelivery {
  return {
    text: item.text(),
    headers: item.headers,
    streamSeq: item.seq,
    ...(queuedSeq === undefined ? {} : { queuedSeq }),
    accepted: () => undefined,
    refused: () => undefined,
    working: () => item.working(),
    settle: async (s) => {
      if (s.kind === 'ack') await item.ack();
      else if (s.kind === 'nak') item.nak(s.delayMs);
    },
  };
}

/**
 * The durable intake: the planners' shared consumer on the run work queue, one request per free run slot. A request
 * not acked within `leaseMs` (a planner that died) goes to another planner.
 *
 * One pull stays open while a slot is free: it asks for the next request as a delivery takes its slot. With no slot
 * free it is stopped (a request that came before the server saw the stop is given back at once), so a request this
 * planner cannot run stays in the queue for another; a new pull starts when a slot frees.
 */
export async function startQueueIntake(
  queue: WorkQueue,
  logger: Logger,
  options: IntakeOptions,
): Promise<() => Promise<void>> {
  const consumer = await queue.consumer(ServiceName.Planner, { ackWaitMs: options.leaseMs });
  const stopping = new AbortController();
  const { signal } = stopping;
  let pull: WorkPull | undefined;
  const endPull = () => {
    pull?.stop();
    pull = undefined;
  };
  const loop = async () => {
    for (let failures = 0; !signal.aborted;) {
      // a free slot is taken at once: the next pull request then leaves in the same write as the delivery's first request
      let release = options.slots.tryAcquire();
      if (release === undefined) {
        endPull();
        release = await options.slots.acquire();
      }
      if (signal.aborted) {
        release();
        break;
      }
      try {
        pull ??= await consumer.pull({ expiresMs: PULL_EXPIRES_MS, signal });
        const item = await pull.next();
        failures = 0;
        if (item === undefined) release();
        else void options.onDelivery(queueDelivery(item)).finally(release);
      } catch (error) {
        release();
        endPull();
        if (signal.aborted) break;
        logger.warn({ err: (error as Error).message }, 'run intake fetch failed; retrying');
        await sleep(backoffDelay(++failures, { baseMs: 500, capMs: 5_000 }), signal);
      }
    }
    endPull();
  };
  const running = loop();
  return async () => {
    stopping.abort();
    await running.catch(() => undefined);
  };
}
