import {
  AgentMeshError,
  CatalogListReplySchema,
  CatalogSearchReplySchema,
  ErrorCode,
  RunInputSchema,
  encodeJson,
  newRequestId,
  requestJson,
  subjects,
} from '@agentmesh/protocol';
import { cancelRun, cancelTookEffect, sendApprovalDecision, sendRunControl } from '@agentmesh/planner';
import { agUiFormat, aiSdkFormat, chooseFormat } from './formats/index.js';
import { HttpError, parseBody, readJsonObject, sendJson } from './http.js';
import { agUiRunBody, aiSdkRunBody } from './chat-adapters.js';
import { RunSubmitter, streamRun } from './submit.js';
import {
  AgUiRunInputSchema,
  AiSdkChatBodySchema,
  ApproveBodySchema,
  CancelBodySchema,
  EmptyBodySchema,
  type GatewayRun,
} from './schemas.js';
import { resumePoint } from './sse.js';
import type { HandlerDeps, RequestContext } from './context.js';

export type { HandlerDeps, RequestContext } from './context.js';

function controlReply(runId: string, duplicate: boolean | undefined) {
  return duplicate === true ? { run_id: runId, ok: true, duplicate } : { run_id: runId, ok: true };
}

const LIVE_STATUSES = new Set(['accepted', 'queued', 'running', 'awaiting_approval', 'paused', 'unknown']);

/** What each route does; every run route first checks that the run is the caller's tenant's (else 404). */
export class GatewayHandlers {
  private readonly submitter: RunSubmitter;

  constructor(private readonly deps: HandlerDeps) {
    this.submitter = new RunSubmitter(deps);
  }

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
    await this.submitter.submit(ctx, await readJsonObject(ctx.req), streamed);
  }

  /** `POST /v1/ag-ui`: what `@ag-ui/client`'s HttpAgent posts (see {@link agUiRunBody}), answered as AG-UI events. */
  async agUi(ctx: RequestContext): Promise<void> {
    const input = parseBody(AgUiRunInputSchema, await readJsonObject(ctx.req), 'AG-UI RunAgentInput');
    await this.submitter.submit(ctx, agUiRunBody(input), agUiFormat);
  }

  /** `POST /v1/chat`: the AI SDK's chat endpoint (see {@link aiSdkRunBody}), answered as a UI message stream. */
  async chat(ctx: RequestContext): Promise<void> {
    const body = parseBody(AiSdkChatBodySchema, await readJsonObject(ctx.req), 'AI SDK chat request');
    await this.submitter.submit(ctx, aiSdkRunBody(body), aiSdkFormat);
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
    await streamRun(ctx.res, this.deps, latest.run_id, 0, aiSdkFormat);
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
    await streamRun(ctx.res, this.deps, runId, after, format);
  }

  async approve(ctx: RequestContext): Promise<void> {
    const body = parseBody(ApproveBodySchema, await readJsonObject(ctx.req), 'approval decision');
    const run = await this.ownRun(ctx);
    const sent = await sendApprovalDecision(
      this.deps.bus,
      run.run_id,
      {
        approval_id: body.approval_id,
        decision: body.decision,
        by: `gateway:${ctx.tenant}`,
        ...(body.reason === undefined ? {} : { reason: body.reason }),
        ...(body.request_id === undefined ? {} : { request_id: body.request_id }),
      },
      { prefix: this.deps.prefix },
    );
    sendJson(ctx.res, 200, controlReply(run.run_id, sent.duplicate));
  }

  async control(ctx: RequestContext, kind: 'input' | 'pause' | 'resume'): Promise<void> {
    const raw = await readJsonObject(ctx.req);
    const run = await this.ownRun(ctx);
    let control: { kind: 'input'; text: string } | { kind: 'pause' | 'resume' };
    let requestId: string | undefined;
    if (kind === 'input') {
      const body = parseBody(RunInputSchema, raw, 'input');
      control = { kind, text: body.text };
      requestId = body.request_id;
    } else {
      requestId = parseBody(EmptyBodySchema, raw, `${kind} request`).request_id;
      control = { kind };
    }
    const sent = await sendRunControl(this.deps.bus, run.run_id, control, {
      prefix: this.deps.prefix,
      ...(requestId === undefined ? {} : { requestId }),
    });
    sendJson(ctx.res, 200, controlReply(run.run_id, sent.duplicate));
  }

  async cancel(ctx: RequestContext): Promise<void> {
    const body = parseBody(CancelBodySchema, await readJsonObject(ctx.req), 'cancel request');
    const run = await this.ownRun(ctx);
    const { bus, prefix } = this.deps;
    const reason = body.reason ?? `cancelled through the gateway (tenant ${ctx.tenant})`;
    if (!LIVE_STATUSES.has(run.status)) throw finished(run.run_id, 'cancel');
    if (bus.durable) {
      const record = await cancelRun(bus, run.run_id, {
        prefix,
        reason,
        requestId: body.request_id ?? newRequestId(),
      });
      if (record !== null && !cancelTookEffect(record)) throw finished(run.run_id, 'cancel');
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

function unknownRun(runId: string): HttpError {
  return new HttpError(404, `no run "${runId}" is known`, ErrorCode.NotFound);
}

function finished(runId: string, what: string): AgentMeshError {
  return new AgentMeshError('run_finished', `run "${runId}" already finished: nothing to ${what}`, {
    retryable: false,
    details: { run_id: runId },
  });
}
