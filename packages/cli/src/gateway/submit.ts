import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import {
  AgentMeshError,
  ErrorCode,
  RunEventSchema,
  RunRequestSchema,
  subjects,
  type RunEvent,
} from '@agentmesh/protocol';
import { submitRun } from '@agentmesh/planner';
import type { z } from 'zod';
import type { StreamFormat } from './formats/index.js';
import type { HandlerDeps, RequestContext } from './context.js';
import { HttpError, parseBody, sendJson } from './http.js';
import { RunStream } from './sse.js';

/**
 * Submits runs for a tenant: sets `identity.tenant` from the key (a body naming another tenant is 403), waits until
 * a planner accepted the run, and answers 202 `{run_id}` or, when asked, the run's stream.
 */
export class RunSubmitter {
  constructor(private readonly deps: HandlerDeps) {}

  /** A run id the tenant already used answers again without a second submit; one of another tenant is 409. */
  async submit(
    ctx: RequestContext,
    body: Record<string, unknown>,
    streamed: StreamFormat | undefined,
  ): Promise<void> {
    const request = this.request(ctx.tenant, body);
    const runId = request.id ?? `run-${randomUUID()}`;
    const owner = request.id === undefined ? undefined : await this.deps.source.tenant(runId);
    if (owner !== undefined && owner !== ctx.tenant) throw taken(runId);
    if (owner === undefined) {
      const first = await this.submitAndWait({ ...request, id: runId });
      this.deps.source.learn(first);
      if (first.type !== 'run.accepted' || (first.identity?.tenant ?? 'default') !== ctx.tenant)
        throw taken(runId);
    }
    ctx.res.setHeader('location', `/v1/runs/${encodeURIComponent(runId)}`);
    if (streamed === undefined) return sendJson(ctx.res, 202, { run_id: runId });
    ctx.res.setHeader('x-agentmesh-run-id', runId);
    await streamRun(ctx.res, this.deps, runId, 0, streamed);
  }

  private request(tenant: string, body: Record<string, unknown>): z.infer<typeof RunRequestSchema> {
    const identity = body['identity'] ?? {};
    if (identity === null || typeof identity !== 'object' || Array.isArray(identity))
      throw new HttpError(400, 'invalid run request: identity must be an object', ErrorCode.InvalidRequest);
    const named = (identity as Record<string, unknown>)['tenant'];
    if (named !== undefined && named !== tenant)
      throw new HttpError(
        403,
        `the request names tenant "${String(named)}" but its API key is of tenant "${tenant}": a key acts for its own tenant only`,
        ErrorCode.PermissionDenied,
      );
    const { defaultScript } = this.deps;
    const scripted =
      defaultScript !== undefined && body['provider'] === undefined && body['script'] === undefined
        ? { script: defaultScript }
        : {};
    return parseBody(
      RunRequestSchema,
      { ...body, ...scripted, identity: { ...identity, tenant } },
      'run request',
    );
  }

  /**
   * Submits and resolves with the run's first event (the planner accepted it), or fails with a named error. It
   * listens on the run's events subject (registered before the submit, on the same connection, so nothing is
   * missed) rather than opening a follower on the event log: one server round trip less per submit.
   */
  private async submitAndWait(request: z.infer<typeof RunRequestSchema> & { id: string }): Promise<RunEvent> {
    const { bus, prefix } = this.deps;
    const timeoutMs = this.deps.acceptTimeoutMs ?? 10_000;
    let accepted!: (event: RunEvent) => void;
    const first = new Promise<RunEvent>((resolve) => (accepted = resolve));
    const sub = bus.subscribe(subjects(prefix).runEvents(request.id), (msg) => {
      const parsed = RunEventSchema.safeParse(safeJson(msg.text()));
      if (parsed.success && parsed.data.seq === 1) accepted(parsed.data);
    });
    let timer: NodeJS.Timeout | undefined;
    try {
      const result = await submitRun(bus, request, { prefix });
      if (result.duplicate === true)
        throw new HttpError(409, `run id "${request.id}" was already submitted`, ErrorCode.Conflict);
      const late = new Promise<never>((_resolve, reject) => {
        timer = setTimeout(() => reject(notAccepted(request.id, timeoutMs)), timeoutMs);
      });
      return await Promise.race([first, late]);
    } finally {
      clearTimeout(timer);
      sub.unsubscribe();
    }
  }
}

/** Streams a run to `res` from after `after` in `format` (see {@link RunStream}). */
export function streamRun(
  res: ServerResponse,
  deps: HandlerDeps,
  runId: string,
  after: number,
  format: StreamFormat,
): Promise<void> {
  return new RunStream(res, {
    source: deps.source,
    runId,
    after,
    format,
    logger: deps.logger,
    keepAliveMs: deps.keepAliveMs,
  }).start();
}

function taken(runId: string): HttpError {
  return new HttpError(409, `run id "${runId}" is taken: choose another id`, ErrorCode.Conflict);
}

function notAccepted(runId: string, timeoutMs: number): AgentMeshError {
  return new AgentMeshError(
    ErrorCode.Timeout,
    `no planner accepted run "${runId}" within ${timeoutMs} ms; on NATS it stays queued for the next planner`,
    { retryable: true, details: { run_id: runId } },
  );
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
