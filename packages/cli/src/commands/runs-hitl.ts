import {
  ApprovalStore,
  openApprovals,
  sendApprovalDecision,
  sendRunControl,
  type ApprovalSendResult,
  type RunControlResult,
} from '@agentmesh/planner';
import {
  TenantPendingReplySchema,
  isAgentMeshError,
  newRequestId,
  requestJson,
  tenantSubjects,
  type Backend,
} from '@agentmesh/protocol';
import { intFlag, stringFlag, usageError, type CommandSpec } from '../args.js';
import { tenantOption, type CommandContext } from '../context.js';
import { HITL_VERBS, type HitlVerb } from '../specs/runs.js';

export function isHitlVerb(verb: string | undefined): verb is HitlVerb {
  return (HITL_VERBS as readonly string[]).includes(verb ?? '');
}

function age(since: string): string {
  const s = Math.max(0, Math.round((Date.now() - Date.parse(since)) / 1000));
  return s < 120 ? `${s}s` : s < 7_200 ? `${Math.round(s / 60)}m` : `${Math.round(s / 3_600)}h`;
}

/** `runs pending`, `runs approve RUN APPROVAL`, `runs deny RUN APPROVAL --reason R`. */
export async function runsHitlCommand(
  ctx: CommandContext,
  spec: CommandSpec,
  bus: Backend,
  verb: HitlVerb,
  operands: readonly string[],
): Promise<number> {
  if (verb === 'pending') return listPending(ctx, spec, bus, operands);
  if (verb === 'input' || verb === 'pause' || verb === 'resume')
    return runControl(ctx, spec, bus, verb, operands);
  const json = ctx.args.values['json'] === true;
  const out = ctx.io.stdout;
  const [runId, approvalId, ...extra] = operands;
  if (runId === undefined || approvalId === undefined)
    throw usageError(spec, `runs ${verb} needs a run id and an approval id (see agentmesh runs pending)`);
  if (extra.length > 0) throw usageError(spec, `unexpected argument "${extra[0]}"`);
  const reason = stringFlag(ctx.args, 'reason');
  const requestId = stringFlag(ctx.args, 'request-id') ?? newRequestId();
  let sent: ApprovalSendResult;
  try {
    sent = await sendApprovalDecision(
      bus,
      runId,
      {
        approval_id: approvalId,
        decision: verb,
        by: stringFlag(ctx.args, 'by') ?? `cli:${process.env['USER'] ?? 'user'}`,
        request_id: requestId,
        ...(reason === undefined ? {} : { reason }),
      },
      {
        prefix: ctx.prefix,
        tenant: tenantOption(ctx),
        timeoutMs: deadlineMs(ctx),
        onRetry: retryLogger(ctx, verb),
      },
    );
  } catch (error) {
    if (!isAgentMeshError(error)) throw error;
    if (json)
      out.write(
        `${JSON.stringify({ ok: false, request_id: requestId, error: { code: error.code, message: error.message, details: error.details } })}\n`,
      );
    ctx.io.stderr.write(`agentmesh runs ${verb}: ${error.code}: ${error.message}\n`);
    return 1;
  }
  out.write(
    json
      ? `${JSON.stringify({ ok: true, run_id: runId, approval_id: approvalId, decision: verb, ...outcomeFields(sent) })}\n`
      : `${verb === 'approve' ? 'approved' : 'denied'} ${approvalId} of run ${runId}${attemptsNote(sent)}\n`,
  );
  return 0;
}

/** `runs pending`: the approvals waiting across the fleet. */
async function listPending(
  ctx: CommandContext,
  spec: CommandSpec,
  bus: Backend,
  operands: readonly string[],
): Promise<number> {
  const out = ctx.io.stdout;
  if (operands.length > 0) throw usageError(spec, `unexpected argument "${operands[0]}"`);
  const tenant = tenantOption(ctx);
  const pending =
    tenant === undefined
      ? await new ApprovalStore(await openApprovals(bus, ctx.prefix)).list()
      : (
          await requestJson(
            bus,
            tenantSubjects(ctx.prefix, tenant).runsPending,
            {},
            TenantPendingReplySchema,
            {
              timeoutMs: 10_000,
            },
          )
        ).pending;
  if (ctx.args.values['json'] === true) out.write(`${JSON.stringify(pending)}\n`);
  else if (pending.length === 0) out.write('no approvals are pending\n');
  else
    for (const a of pending)
      out.write(`${a.run_id}  ${a.approval_id}  ${a.name}  ${age(a.requested_at)}  ${a.summary}\n`);
  return 0;
}

/** The deadline of a control command: `--timeout-ms MS` (default 10 s), every attempt included. */
export function deadlineMs(ctx: CommandContext): number {
  const ms = intFlag(ctx.args, 'timeout-ms');
  return ms === undefined || ms === 0 ? 10_000 : ms;
}

export function retryLogger(ctx: CommandContext, verb: string) {
  return (error: { code: string; message: string }, attempt: number, delayMs: number) =>
    ctx.logger.warn({ verb, attempt, delay_ms: delayMs, code: error.code }, 'no answer: sending again');
}

/** The JSON fields saying how a control request went: its request id, attempts and whether it was a repeat. */
export function outcomeFields(sent: { request_id: string; attempts: number; duplicate?: boolean }) {
  return { request_id: sent.request_id, attempts: sent.attempts, duplicate: sent.duplicate === true };
}

/** ` (after 2 attempts)`, or `; an earlier one had landed` for a repeat, when the request was sent more than once, else nothing. */
export function attemptsNote(sent: { attempts: number; duplicate?: boolean }): string {
  if (sent.attempts <= 1 && sent.duplicate !== true) return '';
  const tries = sent.attempts === 1 ? '1 attempt' : `${sent.attempts} attempts`;
  return sent.duplicate === true ? ` (after ${tries}; an earlier one had landed)` : ` (after ${tries})`;
}

/** `runs input RUN TEXT`, `runs pause RUN`, `runs resume RUN`: recorded by a planner, applied between turns. */
async function runControl(
  ctx: CommandContext,
  spec: CommandSpec,
  bus: Backend,
  verb: 'input' | 'pause' | 'resume',
  operands: readonly string[],
): Promise<number> {
  const [runId, text, ...extra] = operands;
  if (runId === undefined) throw usageError(spec, `runs ${verb} needs a run id`);
  if (verb === 'input' && (text === undefined || text.trim() === ''))
    throw usageError(spec, 'runs input needs the text to add: agentmesh runs input RUN_ID "TEXT"');
  const unexpected = verb === 'input' ? extra[0] : text;
  if (unexpected !== undefined) throw usageError(spec, `unexpected argument "${unexpected}"`);
  let sent: RunControlResult;
  try {
    sent = await sendRunControl(
      bus,
      runId,
      verb === 'input' ? { kind: 'input', text: text! } : { kind: verb },
      {
        prefix: ctx.prefix,
        tenant: tenantOption(ctx),
        requestId: stringFlag(ctx.args, 'request-id') ?? newRequestId(),
        timeoutMs: deadlineMs(ctx),
        onRetry: retryLogger(ctx, verb),
      },
    );
  } catch (error) {
    if (!isAgentMeshError(error)) throw error;
    ctx.io.stderr.write(`agentmesh runs ${verb}: ${error.code}: ${error.message}\n`);
    return 1;
  }
  const done = { input: 'input recorded for', pause: 'pause recorded for', resume: 'resume recorded for' }[
    verb
  ];
  ctx.io.stdout.write(
    ctx.args.values['json'] === true
      ? `${JSON.stringify({ ok: true, run_id: runId, [verb]: true, ...outcomeFields(sent) })}\n`
      : `${done} run ${runId} (applied before its next model turn)${attemptsNote(sent)}\n`,
  );
  return 0;
}
