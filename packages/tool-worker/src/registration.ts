import {
  ARTIFACTS_BUCKET,
  AgentMeshError,
  CatalogHeartbeatReplySchema,
  CatalogRegisterReplySchema,
  ErrorCode,
  ServiceName,
  encodeJson,
  requestJson,
  retry,
  type BlobStore,
  type Backend,
  type CatalogRegisterReply,
  type Logger,
  type ServiceHandle,
  type Subjects,
  type ToolSpec,
} from '@agentmesh/protocol';

/** How many bytes of artifacts an in-process worker keeps (the oldest go first): a long-lived process stays bounded. */
const MEMORY_ARTIFACT_BYTES = 256 * 1024 * 1024;

/** The store of a worker that keeps no artifacts: a heavy output is only previewed, a tool's own write fails. */
const NO_ARTIFACTS: BlobStore = {
  put: () =>
    Promise.reject(
      new AgentMeshError(
        ErrorCode.Unavailable,
        'this worker keeps no artifacts (started with artifacts off)',
        {
          retryable: false,
        },
      ),
    ),
  info: () => Promise.resolve(null),
  get: () => Promise.resolve(null),
  delete: () => Promise.resolve(),
};

/**
 * Opens the artifact store (the one place the worker opens a blob store), with an error that says what to do; with
 * `shared` false, no store: for a worker whose NATS user has no grant on the artifacts bucket.
 */
export async function openArtifactStore(bus: Backend, shared = true): Promise<BlobStore> {
  if (!shared) return NO_ARTIFACTS;
  try {
    return await bus.blobs(ARTIFACTS_BUCKET, { memoryMaxBytes: MEMORY_ARTIFACT_BYTES });
  } catch (error) {
    throw new AgentMeshError(
      ErrorCode.JetStreamUnavailable,
      `the tool worker cannot open the artifact store "${ARTIFACTS_BUCKET}": ${(error as Error).message}. ` +
        'NATS mode needs JetStream: start the server with "nats-server -js".',
      { retryable: false, cause: error },
    );
  }
}

/** Answers service discovery as `agentmesh-tool-worker` (the one place the worker announces itself). */
export function announceWorker(
  bus: Backend,
  workerId: string,
  tools: number,
  inFlight?: () => number,
): Promise<ServiceHandle> {
  return bus.announce({
    name: ServiceName.ToolWorker,
    version: '0.1.0',
    description: 'agentmesh tool worker',
    metadata: { worker_id: workerId, tools: String(tools) },
    ...(inFlight === undefined ? {} : { load: () => ({ in_flight: inFlight() }) }),
  });
}

export interface RegistrationOptions {
  bus: Backend;
  subjects: Subjects;
  workerId: string;
  /** The worker's role: it registers on `catalog.register.<role>` (its NATS user's own subject); else unscoped. */
  role?: string | undefined;
  specs: () => ToolSpec[];
  logger: Logger;
  /** Heartbeat interval; the registration TTL is three times this. */
  heartbeatMs: number;
  /** Aborted when the worker drains. */
  lifecycle: AbortSignal;
}

/**
 * The worker's place in the catalog: registers (retried with backoff until the catalog answers), heartbeats,
 * registers again when the catalog forgot it, and deregisters on drain.
 */
export class Registration {
  private registering: Promise<void> | undefined;
  private registered = false;
  /** Set once the catalog took a registration: a drain then deregisters, even while registering again. */
  private everRegistered = false;
  private timer: NodeJS.Timeout | undefined;
  private readonly first: Promise<CatalogRegisterReply>;
  private resolveFirst!: (reply: CatalogRegisterReply) => void;

  constructor(private readonly options: RegistrationOptions) {
    this.first = new Promise<CatalogRegisterReply>((resolve) => (this.resolveFirst = resolve));
  }

  /** Resolves with the catalog's answer once this worker is registered. */
  whenRegistered(): Promise<CatalogRegisterReply> {
    return this.first;
  }

  start(): void {
    this.registering = this.register();
    this.timer = setInterval(() => void this.heartbeat(), this.options.heartbeatMs);
    this.timer.unref();
  }

  /** Registers the worker's current tool set again (it changed at runtime); resolves once the catalog took it. */
  async registerAgain(): Promise<void> {
    if (this.options.lifecycle.aborted || this.timer === undefined) return;
    await this.registering?.catch(() => undefined);
    this.registering = this.register();
    await this.registering;
  }

  /** Stops heartbeats and registering; deregisters when the catalog ever took this worker's registration. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.registering?.catch(() => undefined);
    if (!this.everRegistered) return;
    const { bus, subjects, workerId, logger } = this.options;
    await bus
      .request(subjects.catalogDeregister, encodeJson({ worker_id: workerId }), { timeoutMs: 1000 })
      .catch((error: unknown) => logger.debug({ err: (error as Error).message }, 'deregister got no answer'));
  }

  private async register(): Promise<void> {
    const { bus, subjects, workerId, logger, role, lifecycle: signal } = this.options;
    const subject = role === undefined ? subjects.catalogRegister : subjects.catalogRegisterAs(role);
    try {
      const reply = await retry(
        () =>
          requestJson(
            bus,
            subject,
            { worker_id: workerId, tools: this.options.specs(), ttl_ms: this.options.heartbeatMs * 3 },
            CatalogRegisterReplySchema,
            { timeoutMs: 3000, signal },
          ),
        {
          baseMs: 200,
          capMs: 5000,
          jitter: 0.25,
          signal,
          retryable: () => true,
          onRetry: (error, _attempt, delay) =>
            logger.debug(
              { err: error.message, retry_ms: delay },
              'catalog did not take the registration yet',
            ),
        },
      );
      this.registered = true;
      this.everRegistered = true;
      for (const r of reply.rejected)
        logger.error({ tool: r.name, code: r.error.code, err: r.error.message }, 'catalog rejected a tool');
      logger.info(
        { accepted: reply.accepted.length, rejected: reply.rejected.length },
        'registered with the catalog',
      );
      this.resolveFirst(reply);
    } catch (error) {
      if (!signal.aborted) throw error;
    }
  }

  private async heartbeat(): Promise<void> {
    const { bus, subjects, workerId, logger, lifecycle } = this.options;
    if (lifecycle.aborted || !this.registered) return;
    try {
      const reply = await requestJson(
        bus,
        subjects.catalogHeartbeat,
        { worker_id: workerId },
        CatalogHeartbeatReplySchema,
        { timeoutMs: Math.min(3000, this.options.heartbeatMs), signal: lifecycle },
      );
      if (!reply.known && !lifecycle.aborted) {
        logger.info('the catalog forgot this worker; registering again');
        this.registered = false;
        this.registering = this.register();
      }
    } catch (error) {
      logger.debug({ err: (error as Error).message }, 'catalog heartbeat got no answer');
    }
  }
}
