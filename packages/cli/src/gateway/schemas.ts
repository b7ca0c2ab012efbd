import { z } from 'zod';
import {
  ErrorPayloadSchema,
  RequestIdSchema,
  RunEventSchema,
  RunWaitingSchema,
  ToolSummarySchema,
} from '@agentmesh/protocol';

/** A run as the gateway shows it (`GET /v1/runs/{id}` and the run list). */
export const GatewayRunSchema = z.object({
  run_id: z.string(),
  tenant: z.string(),
  session: z.string().optional(),
  task: z.string(),
  /** `accepted`, `running`, `awaiting_approval`, `paused`, or how it ended (`done`, `failed`, `cancelled`, ...). */
  status: z.string(),
  accepted_at: z.string().optional(),
  finished_at: z.string().optional(),
  planner_id: z.string().optional(),
  waiting: RunWaitingSchema.optional(),
});
export type GatewayRun = z.infer<typeof GatewayRunSchema>;

export const SubmitReplySchema = z.object({ run_id: z.string() });
export const RunListReplySchema = z.object({ runs: z.array(GatewayRunSchema) });
export const ToolListReplySchema = z.object({
  tools: z.array(ToolSummarySchema.extend({ score: z.number().optional() })),
});
export const ErrorReplySchema = z.object({ error: ErrorPayloadSchema });
export const HealthReplySchema = z.object({ ok: z.boolean() });

/** `POST /v1/runs/{id}/approve`: decide a call that waits for a human (`decision` defaults to approve). */
export const ApproveBodySchema = z
  .object({
    approval_id: z.string().min(1).max(128),
    decision: z.enum(['approve', 'deny']).default('approve'),
    reason: z.string().max(4_096).optional(),
    request_id: RequestIdSchema.optional(),
  })
  .strict();
export const CancelBodySchema = z
  .object({ reason: z.string().max(4_096).optional(), request_id: RequestIdSchema.optional() })
  .strict();
/** The body of pause and resume: empty, or a client `request_id` that makes sending it again safe. */
export const EmptyBodySchema = z.object({ request_id: RequestIdSchema.optional() }).strict();
export const ControlReplySchema = z.object({
  run_id: z.string(),
  ok: z.literal(true),
  duplicate: z.boolean().optional(),
});

/** One frame of the `agentmesh` stream format: a run event as it is. */
export const StreamFrameSchema = RunEventSchema;

/** What `POST /v1/ag-ui` reads of an AG-UI RunAgentInput (other fields are allowed and ignored). */
export const AgUiRunInputSchema = z.looseObject({
  threadId: z.string(),
  runId: z.string(),
  messages: z.array(z.looseObject({ role: z.string(), content: z.unknown() })),
  forwardedProps: z.record(z.string(), z.unknown()).optional(),
});

/** One AG-UI event (see @ag-ui/core; the gateway's own are listed in docs/gateway.md). */
export const AgUiEventSchema = z.looseObject({ type: z.string() });

/** What `POST /v1/chat` reads of an AI SDK chat request (DefaultChatTransport's body; other fields are ignored). */
export const AiSdkChatBodySchema = z.looseObject({
  id: z.string().min(1).max(256),
  messages: z.array(z.looseObject({ role: z.string(), parts: z.array(z.unknown()).optional() })),
  /** More RunRequest fields for the run (`provider`, `model`, `tools`, ...): DefaultChatTransport's `body`. */
  agentmesh: z.record(z.string(), z.unknown()).optional(),
});

/** One AI SDK UI message stream chunk. */
export const AiSdkChunkSchema = z.looseObject({ type: z.string() });
