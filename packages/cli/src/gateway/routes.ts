import { RunInputSchema, RunRequestSchema } from '@agentmesh/protocol';
import type { z } from 'zod';
import type { Route, RouteResponse } from './route.js';
import { sendJson } from './http.js';
import { openApiDocument } from './openapi.js';
import {
  AgUiEventSchema,
  AiSdkChatBodySchema,
  AiSdkChunkSchema,
  AgUiRunInputSchema,
  ApproveBodySchema,
  CancelBodySchema,
  ControlReplySchema,
  EmptyBodySchema,
  GatewayRunSchema,
  HealthReplySchema,
  RunListReplySchema,
  StreamFrameSchema,
  SubmitReplySchema,
  ToolListReplySchema,
} from './schemas.js';

/** The version of the gateway API in its OpenAPI document. */
export const GATEWAY_API_VERSION = '1.0.0';

const NAMED_ERRORS = {
  400: { description: 'invalid_request: malformed JSON or a field that does not validate (named)' },
  401: { description: 'permission_denied: no or an unknown API key' },
  404: { description: 'not_found: no such run for this tenant' },
} satisfies Record<number, RouteResponse>;

function control(
  kind: 'approve' | 'input' | 'pause' | 'resume' | 'cancel',
  body: z.ZodType,
  summary: string,
): Route {
  return {
    method: 'POST',
    path: `/v1/runs/{id}/${kind}`,
    summary,
    auth: true,
    body,
    responses: {
      200: { description: 'recorded', schema: ControlReplySchema },
      ...NAMED_ERRORS,
      409: { description: 'run_finished, already_decided' },
    },
    handle: (h, ctx) =>
      kind === 'approve' ? h.approve(ctx) : kind === 'cancel' ? h.cancel(ctx) : h.control(ctx, kind),
  };
}

export const ROUTES: readonly Route[] = [
  {
    method: 'POST',
    path: '/v1/runs',
    summary:
      'Submit a run; answers once a planner accepted it (with Accept: text/event-stream, with its stream)',
    auth: true,
    query: { format: 'answer with the run stream in this format: agentmesh, ag-ui or ai-sdk' },
    body: RunRequestSchema,
    responses: {
      200: {
        description:
          'with Accept: text/event-stream or ?format=: the run stream, as GET /v1/runs/{id}/events',
        schema: StreamFrameSchema,
        sse: true,
      },
      202: { description: 'accepted', schema: SubmitReplySchema },
      400: NAMED_ERRORS[400],
      401: NAMED_ERRORS[401],
      403: { description: 'permission_denied: the body names another tenant' },
      409: { description: 'conflict: the run id is taken' },
      413: { description: 'payload_too_large: the body is over 1 MiB' },
      504: { description: 'timeout: no planner accepted the run in time' },
    },
    handle: (h, ctx) => h.submit(ctx),
  },
  {
    method: 'POST',
    path: '/v1/ag-ui',
    summary:
      'An AG-UI agent endpoint: a RunAgentInput (last user message = task, threadId = session, runId = run id, forwardedProps = more RunRequest fields) answered with the run as AG-UI events',
    auth: true,
    body: AgUiRunInputSchema,
    responses: {
      200: { description: 'text/event-stream of AG-UI events', schema: AgUiEventSchema, sse: true },
      400: NAMED_ERRORS[400],
      401: NAMED_ERRORS[401],
      403: { description: 'permission_denied: forwardedProps name another tenant' },
      409: { description: 'conflict: the run id is taken' },
    },
    handle: (h, ctx) => h.agUi(ctx),
  },
  {
    method: 'POST',
    path: '/v1/chat',
    summary:
      "The AI SDK's chat endpoint (DefaultChatTransport): last user message = task, chat id = session, agentmesh = more RunRequest fields; answered with the run as a UI message stream",
    auth: true,
    body: AiSdkChatBodySchema,
    responses: {
      200: {
        description: 'the UI message stream (x-vercel-ai-ui-message-stream: v1)',
        schema: AiSdkChunkSchema,
        sse: true,
      },
      400: NAMED_ERRORS[400],
      401: NAMED_ERRORS[401],
      403: { description: 'permission_denied: agentmesh.identity names another tenant' },
    },
    handle: (h, ctx) => h.chat(ctx),
  },
  {
    method: 'GET',
    path: '/v1/chat/{id}/stream',
    summary: "The AI SDK's resume: the chat's run in progress, replayed from its start and followed",
    auth: true,
    responses: {
      200: { description: 'the UI message stream', schema: AiSdkChunkSchema, sse: true },
      204: { description: 'the chat has no run in progress' },
      401: NAMED_ERRORS[401],
    },
    handle: (h, ctx) => h.chatStream(ctx),
  },
  {
    method: 'GET',
    path: '/v1/runs',
    summary: "The tenant's runs, newest first",
    auth: true,
    query: {
      status: 'only runs in this status',
      session: 'only runs of this session',
      tenant: "the key's own tenant",
      limit: 'at most this many (1-200, default 50)',
    },
    responses: { 200: { description: 'runs', schema: RunListReplySchema }, 401: NAMED_ERRORS[401] },
    handle: (h, ctx) => h.list(ctx),
  },
  {
    method: 'GET',
    path: '/v1/runs/{id}',
    summary: 'One run',
    auth: true,
    responses: {
      200: { description: 'the run', schema: GatewayRunSchema },
      401: NAMED_ERRORS[401],
      404: NAMED_ERRORS[404],
    },
    handle: (h, ctx) => h.show(ctx),
  },
  {
    method: 'GET',
    path: '/v1/runs/{id}/events',
    summary: 'The run events as Server-Sent Events (id = seq), resumable with Last-Event-ID or ?after=',
    auth: true,
    query: { after: 'send events after this seq', format: 'agentmesh (default), ag-ui or ai-sdk' },
    responses: {
      200: { description: 'text/event-stream', schema: StreamFrameSchema, sse: true },
      400: NAMED_ERRORS[400],
      401: NAMED_ERRORS[401],
      404: NAMED_ERRORS[404],
    },
    handle: (h, ctx) => h.events(ctx),
  },
  control('approve', ApproveBodySchema, 'Approve or deny a call that waits for a human'),
  control('input', RunInputSchema, 'Add a user message before the next model turn'),
  control('pause', EmptyBodySchema, 'Pause the run between turns'),
  control('resume', EmptyBodySchema, 'Resume a paused run'),
  control('cancel', CancelBodySchema, 'Cancel the run'),
  {
    method: 'GET',
    path: '/v1/tools',
    summary: 'The catalog, or a search of it with ?q=',
    auth: true,
    query: { q: 'search words' },
    responses: { 200: { description: 'tools', schema: ToolListReplySchema }, 401: NAMED_ERRORS[401] },
    handle: (h, ctx) => h.tools(ctx),
  },
  {
    method: 'GET',
    path: '/healthz',
    summary: 'The process is up',
    auth: false,
    responses: { 200: { description: 'up', schema: HealthReplySchema } },
    handle: (_h, ctx) => Promise.resolve(sendJson(ctx.res, 200, { ok: true })),
  },
  {
    method: 'GET',
    path: '/openapi.json',
    summary: 'This document',
    auth: false,
    responses: { 200: { description: 'OpenAPI 3.1' } },
    handle: (_h, ctx) =>
      Promise.resolve(sendJson(ctx.res, 200, openApiDocument(ROUTES, GATEWAY_API_VERSION))),
  },
  {
    method: 'GET',
    path: '/readyz',
    summary: 'The bus answers',
    auth: false,
    responses: {
      200: { description: 'ready', schema: HealthReplySchema },
      503: { description: 'the bus does not answer', schema: HealthReplySchema },
    },
    handle: (h, ctx) => h.ready(ctx),
  },
];

const compiled = ROUTES.map((route) => ({
  route,
  names: [...route.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!),
  pattern: new RegExp(`^${route.path.replace(/\{\w+\}/g, '([^/]+)')}$`),
}));

/** The route of a request and its path parameters; `methods` lists what the path allows when the method is wrong. */
export function matchRoute(
  method: string,
  pathname: string,
): { route: Route; params: Record<string, string> } | { methods: string[] } | undefined {
  const methods: string[] = [];
  for (const { route, names, pattern } of compiled) {
    const found = pattern.exec(pathname);
    if (found === null) continue;
    if (route.method !== method) {
      methods.push(route.method);
      continue;
    }
    const params = Object.fromEntries(names.map((name, i) => [name, decodeURIComponent(found[i + 1]!)]));
    return { route, params };
  }
  return methods.length > 0 ? { methods } : undefined;
}
