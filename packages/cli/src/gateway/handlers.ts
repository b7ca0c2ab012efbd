import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  AgentMeshError,
  CatalogListReplySchema,
  CatalogSearchReplySchema,
  ErrorCode,
  RunInputSchema,
  RunEventSchema,
  RunRequestSchema,
  describeZodError,
  encodeJson,
  requestJson,
  subjects,
  type Backend,
  type Logger,
  type RunEvent,
} from '@agentmesh/protocol';
import { cancelRun, sendApprovalDecision, sendRunControl, submitRun } from '@agentmesh/planner';
import type { z } from 'zod';
import { agUiFormat, aiSdkFormat, chooseFormat, type StreamFormat } from './formats/index.js';
import { HttpError, readJsonObject, sendJson } from './http.js';
import {
  AgUiRunInputSchema,
  AiSdkChatBodySchema,
  ApproveBodySchema,
  CancelBodySchema,
  EmptyBodySchema,
  type GatewayRun,
} from './schemas.js';
import { RunStream, resumePoint } from './sse.js';
import type { RunSource } from './source.js';

/** One authenticated request: who asks (the tenant of its key) and the path's parameters. */
export interface RequestContext {
  req: IncomingMessage;
  res: ServerResponse;
  url: URL;
  params: Record<string, string>;
  tenant: string;
}

export interface HandlerDeps {
  bus: Backend;
  prefix: string;
  source: RunSource;
  logger: Logger;
  /** How long `POST /v1/runs` waits for a planner to accept the run (default 10 s). */
  acceptTimeoutMs?: number | undefined;
  keepAliveMs?: number | undefined;
  /** Model turns for runs that name neither a provider nor a script (`--script`: demos without a model). */
  defaultScript?: unknown;
}

const LIVE_STATUSES = new Set(['accepted', 'running', 'awaiting_approval', 'paused', 'unknown']);

function parseBody<T extends z.ZodType>(schema: T, body: unknown, what: string): z.infer<T> {
  const parsed = schema.safeParse(body);
  if (!parsed.success)
    throw new HttpError(400, `invalid ${what}: ${describeZodError(parsed.error)}`, ErrorCode.InvalidRequest);
  return parsed.data;
}

/** What each route does; every run route first checks that the run is the caller's tenant's (else 404). */
export class GatewayHandlers {
  constructor(private readonly deps: HandlerDeps) {}

  /**
   * `POST /v1/runs`: 202 `{run_id}` once a planner accepted the run (a run id the tenant already used answers the
   * same without a second submit; one of another tenant is 409); with `Accept: text/event-stream` (or
   * `?format=`) the answer is the run's stream instead, from its first event (one request less for a chat UI).
   */
  async submit(ctx: RequestContext): Promise<void> {
    const accept = ctx.req.headers.accept ?? '';
    const format = ctx.url.searchParams.get('format');
    const streamed =
      /text\/event-stream/i.test(accept) || format !== null ? chooseFormat(format, accept) : undefined;
    await this.submitBody(ctx, await readJsonObject(ctx.req), streamed);
  }

  /**
   * `POST /v1/ag-ui`: an AG-UI agent endpoint (what `@ag-ui/client`'s HttpAgent posts): the last user message of
   * the RunAgentInput is the task, `threadId` the session (`identity.session`) (the planner keeps the conversation), `runId` the run id,
   * and `forwardedProps` may hold more RunRequest fields. The answer is the run's `ag-ui` stream.
   */
  async agUi(ctx: RequestContext): Promise<void> {
    const input = parseBody(AgUiRunInputSchema, await readJsonObject(ctx.req), 'AG-UI RunAgentInput');
    const task = lastUserText(input.messages);
    if (task === undefined)
      throw new HttpError(
        400,
        'invalid AG-UI RunAgentInput: messages hold no user message with text',
        ErrorCode.InvalidRequest,
      );
    const { identity, ...extra } = input.forwardedProps ?? {};
    await this.submitBody(
      ctx,
      { ...extra, id: input.runId, task, identity: withSession(identity, input.threadId) },
      agUiFormat,
    );
  }

  /**
   * `POST /v1/chat`: the AI SDK's chat endpoint (DefaultChatTransport): the last user message's text is the task,
   * the chat id the session, `agentmesh` more RunRequest fields; the answer is the run's `ai-sdk` stream.
   */
  async chat(ctx: RequestContext): Promise<void> {
    const body = parseBody(AiSdkChatBodySchema, await readJsonObject(ctx.req), 'AI SDK chat request');
    const task = lastUserText(body.messages.map((m) => ({ role: m.role, content: m.parts })));
    if (task === undefined)
      throw new HttpError(
        400,
        'invalid AI SDK chat request: no user message with text',
        ErrorCode.InvalidRequest,
      );
    const { identity, ...extra } = body.agentmesh ?? {};
    await this.submitBody(ctx, { ...extra, task, identity: withSession(identity, body.id) }, aiSdkFormat);
  }

  /**
   * `GET /v1/chat/{id}/stream`: the AI SDK's resume: the chat's newest run, replayed from its start and followed
   * while it runs (the SDK expects a replay); 204 when the chat has no run in progress.
   */
  async chatStream(ctx: RequestContext): Promise<void> {
    const chatId = ctx.params['id']!;
    const [latest] = await this.deps.source.list({ tenant: ctx.tenant, session: chatId, limit: 1 });
    if (latest === undefined || !LIVE_STATUSES.has(latest.status)) {
      ctx.res.writeHead(204, { 'cache-control': 'no-store' });
      return void ctx.res.end();
    }
    await this.stream(ctx.res, latest.run_id, 0, aiSdkFormat);
  }

  private async submitBody(
    ctx: RequestContext,
    body: Record<string, unknown>,
    streamed: StreamFormat | undefined,
  ): Promise<void> {
    const identity = body['identity'] ?? {};
    if (identity === null || typeof identity !== 'object' || Array.isArray(identity))
      throw new HttpError(400, 'invalid run request: identity must be an object', ErrorCode.InvalidRequest);
    const named = (identity as Record<string, unknown>)['tenant'];
    if (named !== undefined && named !== ctx.tenant)
      throw new HttpError(
        403,
        `the request names tenant "${String(named)}" but its API key is of tenant "${ctx.tenant}": a key acts for its own tenant only`,
        ErrorCode.PermissionDenied,
      );
    const { defaultScript } = this.deps;
    const scripted =
      defaultScript !== undefined && body['provider'] === undefined && body['script'] === undefined
        ? { script: defaultScript }
        : {};
    const request = parseBody(
      RunRequestSchema,
      { ...body, ...scripted, identity: { ...identity, tenant: ctx.tenant } },
      'run request',
    );
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
    await this.stream(ctx.res, runId, 0, streamed);
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

  async show(ctx: RequestContext): Promise<void> {
    sendJson(ctx.res, 200, await this.ownRun(ctx));
  }

  async list(ctx: RequestContext): Promise<void> {
    const q = (name: string) => ctx.url.searchParams.get(name) || undefined;
    const tenant = q('tenant');
    if (tenant !== undefined && tenant !== ctx.tenant)
      throw new HttpError(
        403,
        `the list asks for tenant "${tenant}" but the API key is of tenant "${ctx.tenant}"`,
        ErrorCode.PermissionDenied,
      );
    const limit = Math.min(Math.max(Number(q('limit') ?? 50) || 50, 1), 200);
    const runs = await this.deps.source.list({
      tenant: ctx.tenant,
      status: q('status'),
      session: q('session'),
      limit,
    });
    sendJson(ctx.res, 200, { runs });
  }

  async events(ctx: RequestContext): Promise<void> {
    const format = chooseFormat(ctx.url.searchParams.get('format'), ctx.req.headers.accept);
    const after = resumePoint(ctx.req, ctx.url);
    const runId = ctx.params['id']!;
    if ((await this.deps.source.tenant(runId)) !== ctx.tenant) throw unknownRun(runId);
    await this.stream(ctx.res, runId, after, format);
  }

  private stream(res: ServerResponse, runId: string, after: number, format: StreamFormat): Promise<void> {
    return new RunStream(res, {
      source: this.deps.source,
      runId,
      after,
      format,
      logger: this.deps.logger,
      keepAliveMs: this.deps.keepAliveMs,
    }).start();
  }

  async approve(ctx: RequestContext): Promise<void> {
    const body = parseBody(ApproveBodySchema, await readJsonObject(ctx.req), 'approval decision');
    const run = await this.ownRun(ctx);
    await sendApprovalDecision(
      this.deps.bus,
      run.run_id,
      {
        approval_id: body.approval_id,
        decision: body.decision,
        by: `gateway:${ctx.tenant}`,
        ...(body.reason === undefined ? {} : { reason: body.reason }),
      },
      { prefix: this.deps.prefix },
    );
    sendJson(ctx.res, 200, { run_id: run.run_id, ok: true });
  }

  async control(ctx: RequestContext, kind: 'input' | 'pause' | 'resume'): Promise<void> {
    const raw = await readJsonObject(ctx.req);
    const run = await this.ownRun(ctx);
    let control: { kind: 'input'; text: string } | { kind: 'pause' | 'resume' };
    if (kind === 'input') control = { kind, text: parseBody(RunInputSchema, raw, 'input').text };
    else {
      parseBody(EmptyBodySchema, raw, `${kind} request`);
      control = { kind };
    }
    await sendRunControl(this.deps.bus, run.run_id, control, { prefix: this.deps.prefix });
    sendJson(ctx.res, 200, { run_id: run.run_id, ok: true });
  }

  async cancel(ctx: RequestContext): Promise<void> {
    const body = parseBody(CancelBodySchema, await readJsonObject(ctx.req), 'cancel request');
    const run = await this.ownRun(ctx);
    const { bus, prefix } = this.deps;
    const reason = body.reason ?? `cancelled through the gateway (tenant ${ctx.tenant})`;
    if (!LIVE_STATUSES.has(run.status)) throw finished(run.run_id, 'cancel');
    if (bus.durable) {
      const record = await cancelRun(bus, run.run_id, { prefix, reason });
      if (record?.state === 'finished') throw finished(run.run_id, 'cancel');
    } else bus.publish(subjects(prefix).runCancel(run.run_id), encodeJson({ reason }));
    sendJson(ctx.res, 200, { run_id: run.run_id, ok: true });
  }

  async tools(ctx: RequestContext): Promise<void> {
    const { bus, prefix } = this.deps;
    const s = subjects(prefix);
    const list = await requestJson(bus, s.catalogList, {}, CatalogListReplySchema, { timeoutMs: 3000 });
    const query = ctx.url.searchParams.get('q') || undefined;
    if (query === undefined) return sendJson(ctx.res, 200, { tools: list.tools });
    const found = await requestJson(
      bus,
      s.catalogSearch,
      { query, strategy: 'bm25', limit: 20, deferred_only: false },
      CatalogSearchReplySchema,
      { timeoutMs: 3000 },
    );
    const byName = new Map(list.tools.map((t) => [t.name, t]));
    sendJson(ctx.res, 200, {
      tools: found.results.flatMap((r) => {
        const tool = byName.get(r.name);
        return tool ? [{ ...tool, score: r.score }] : [];
      }),
    });
  }

  async ready(ctx: RequestContext): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const ok = await Promise.race([
      this.deps.bus.flush().then(() => true),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), 2_000))),
    ]).catch(() => false);
    clearTimeout(timer);
    sendJson(ctx.res, ok ? 200 : 503, { ok });
  }

  /** The run of the path, when it is the caller's tenant's; a run of another tenant is as unknown (404). */
  private async ownRun(ctx: RequestContext): Promise<GatewayRun> {
    const runId = ctx.params['id']!;
    const run = await this.deps.source.get(runId);
    if (run === undefined || run.tenant !== ctx.tenant) throw unknownRun(runId);
    return run;
  }
}

/** The text of the last user message (a string, or the text parts of a content list). */
function lastUserText(messages: { role: string; content: unknown }[]): string | undefined {
  const last = messages.findLast((m) => m.role === 'user');
  const content = last?.content;
  const text =
    typeof content === 'string'
      ? content
      : Array.isArray(content)
        ? content
            .flatMap((part: unknown) =>
              typeof part === 'object' && part !== null && (part as { type?: unknown }).type === 'text'
                ? [String((part as { text?: unknown }).text ?? '')]
                : [],
            )
            .join('\n')
        : '';
  return text.trim() === '' ? undefined : text;
}

/** `identity` with `session` set (an identity that is not an object is left for the request check to refuse). */
function withSession(identity: unknown, session: string): unknown {
  if (
    identity !== undefined &&
    (typeof identity !== 'object' || identity === null || Array.isArray(identity))
  )
    return identity;
  return { ...(identity as Record<string, unknown> | undefined), session };
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

function unknownRun(runId: string): HttpError {
  return new HttpError(404, `no run "${runId}" is known`, ErrorCode.NotFound);
}

function finished(runId: string, what: string): AgentMeshError {
  return new AgentMeshError('run_finished', `run "${runId}" already finished: nothing to ${what}`, {
    retryable: false,
    details: { run_id: runId },
  });
}
