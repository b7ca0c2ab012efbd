import { natsFailure, retry, type Backend, type Logger } from '@agentmesh/protocol';

/** An actor the CLI serves: started once its bus is up, stopped on SIGTERM. */
export interface Actor {
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** The backoff of an actor's start-up: retried while the process lives, at most every 5 s. */
const STARTUP_BACKOFF = { baseMs: 250, capMs: 5_000 } as const;

/**
 * Connects and starts an actor, trying again with backoff while a failure is retryable (NATS not up yet, a JetStream
 * leader election, an asset that timed out); a permanent failure (a permissions violation, an invalid setting) is
 * thrown at once. A failed start closes its connection and the next attempt builds the actor afresh.
 */
export function startActor(
  name: string,
  natsUrl: string | undefined,
  logger: Logger,
  connect: () => Promise<Backend>,
  build: (bus: Backend) => Actor,
): Promise<{ bus: Backend; actor: Actor }> {
  const connected = () =>
    retry(connect, {
      ...STARTUP_BACKOFF,
      onRetry: (error, attempt, delayMs) =>
        logger.warn(
          { nats: natsUrl, attempt, retryInMs: delayMs, err: error.message },
          `waiting for NATS at ${natsUrl ?? '(unset)'}: ${error.message}, retrying in ${delayMs} ms`,
        ),
    });
  return retry(
    async () => {
      const bus = await connected();
      const actor = build(bus);
      try {
        await actor.start();
      } catch (error) {
        await bus.close().catch(() => undefined);
        throw natsFailure(error);
      }
      return { bus, actor };
    },
    {
      ...STARTUP_BACKOFF,
      onRetry: (error, attempt, delayMs) =>
        logger.warn(
          { attempt, retryInMs: delayMs, err: error.message, code: error.code },
          `starting ${name}: ${error.message}, retrying in ${delayMs} ms`,
        ),
    },
  );
}
