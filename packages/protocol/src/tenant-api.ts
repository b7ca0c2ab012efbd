/**
 * The messages of the tenant API (`<prefix>.tenant.<tenant>.…`, docs/tenancy.md): what a tenant's client sends and
 * what the planner answers. Per-run controls (approve, input, pause, resume, trigger) take the same bodies and give
 * the same answers as the `runs.<run_id>.<verb>` subjects.
 */
import { z } from 'zod';
import { RunEventSchema } from './schemas/events.js';

/** `runs.submit`: the run was put into the intake under this run id (`duplicate`: that id was submitted before). */
export const TenantSubmitReplySchema = z.object({
  ok: z.literal(true),
  run_id: z.string(),
  duplicate: z.boolean().optional(),
});
export type TenantSubmitReply = z.infer<typeof TenantSubmitReplySchema>;

/** `runs.list`: the newest runs of the tenant (at most `limit`, default 50), optionally only running or finished. */
export const TenantRunsListRequestSchema = z
  .object({
    state: z.enum(['running', 'finished']).optional(),
    limit: z.number().int().min(1).max(1000).optional(),
  })
  .strict();

/** A run record as the tenant API shows it (the planner's run record, without lease internals). */
export const TenantRunRecordSchema = z
  .object({ run_id: z.string(), state: z.enum(['running', 'finished']), accepted_at: z.string() })
  .passthrough();
export type TenantRunRecord = z.infer<typeof TenantRunRecordSchema>;

export const TenantRunsListReplySchema = z.object({ runs: z.array(TenantRunRecordSchema) });

/** `runs.pending`: the approvals waiting in the tenant's runs. */
export const TenantPendingReplySchema = z.object({
  pending: z.array(
    z
      .object({
        run_id: z.string(),
        approval_id: z.string(),
        name: z.string(),
        summary: z.string(),
        requested_at: z.string(),
      })
      .passthrough(),
  ),
});

/** `runs.<id>.history`: the run's stored events after `after_seq` (default: from the first). */
export const TenantHistoryRequestSchema = z
  .object({ after_seq: z.number().int().min(0).optional() })
  .strict();

/** A page of stored events; `more` says a later page has events (ask again with `after_seq: last_seq`). */
export const TenantHistoryReplySchema = z.object({
  events: z.array(RunEventSchema),
  last_seq: z.number().int().min(0),
  more: z.boolean(),
});
export type TenantHistoryReply = z.infer<typeof TenantHistoryReplySchema>;

/** `runs.<id>.show`: the run's record and, once finished, a summary of its transcript. */
export const TenantRunShowReplySchema = z.object({
  record: TenantRunRecordSchema,
  transcript: z
    .object({ messages: z.number().int(), events: z.number().int(), status: z.string().optional() })
    .nullable(),
});

/**
 * `runs.<id>.cancel`: the answer says what the run's record held; `queued: true` when the run still waited in its
 * tenant's queue and this cancel ended it (`state: finished`, `status: cancelled`: it never starts).
 */
export const TenantCancelReplySchema = z.object({
  run_id: z.string(),
  state: z.enum(['running', 'finished']),
  cancelled: z.boolean(),
  status: z.string().optional(),
  queued: z.boolean().optional(),
});

/** The answer of a planner to a request on `runs.<id>.cancel` (one that stopped the run, or ended it queued). */
export const RunCancelReplySchema = z.object({
  run_id: z.string(),
  cancelled: z.boolean(),
  queued: z.boolean().optional(),
  status: z.string().optional(),
});

/** `sessions.show|delete` name the session; `sessions.fork` also the new id (`to`). */
export const TenantSessionRequestSchema = z
  .object({ session: z.string().min(1).max(256), to: z.string().min(1).max(256).optional() })
  .strict();

/** `sessions.list`: the tenant's sessions, newest first. */
export const TenantSessionsListReplySchema = z.object({
  sessions: z.array(
    z
      .object({ session: z.string(), runs: z.number(), messages: z.number(), updated_at: z.string() })
      .passthrough(),
  ),
});

/** `sessions.show`: the session's record (its transcript). */
export const TenantSessionShowReplySchema = z.object({
  session: z
    .object({
      session: z.string(),
      runs: z.array(z.string()),
      messages: z.array(z.unknown()),
      updated_at: z.string(),
    })
    .passthrough(),
});

/** `sessions.delete|fork`: done. */
export const TenantSessionDoneReplySchema = z.object({ ok: z.literal(true) }).passthrough();
