import { ApprovalStore, openApprovals, sendApprovalDecision, sendRunControl } from '@agentmesh/planner';
import { isAgentMeshError, type Backend } from '@agentmesh/protocol';
import { stringFlag, usageError, type CommandSpec } from '../args.js';
import type { CommandContext } from '../context.js';
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
  const json = ctx.args.values['json'] === true;
  const out = ctx.io.stdout;
  if (verb === 'pending') {
    if (operands.length > 0) throw usageError(spec, `unexpected argument "${operands[0]}"`);
    const pending = await new ApprovalStore(await openApprovals(bus, ctx.prefix)).list();
    if (json) out.write(`${JSON.stringify(pending)}\n`);
    else if (pending.length === 0) out.write('no approvals are pending\n');
    else
      for (const a of pending)
        out.write(`${a.run_id}  ${a.approval_id}  ${a.name}  ${age(a.requested_at)}  ${a.summary}\n`);
    return 0;
  }
  if (verb === 'input' || verb === 'pause' || verb === 'resume')
    return runControl(ctx, spec, bus, verb, operands);
  const [runId, approvalId, ...extra] = operands;
  if (runId === undefined || approvalId === undefined)
    throw usageError(spec, `runs ${verb} needs a run id and an approval id (see agentmesh runs pending)`);
  if (extra.length > 0) throw usageError(spec, `unexpected argument "${extra[0]}"`);
  const reason = stringFlag(ctx.args, 'reason');
  try {
    await sendApprovalDecision(
      bus,
      runId,
      {
        approval_id: approvalId,
        decision: verb,
        by: stringFlag(ctx.args, 'by') ?? `cli:${process.env['USER'] ?? 'user'}`,
        ...(reason === undefined ? {} : { reason }),
      },
      { prefix: ctx.prefix },
    );
  } catch (error) {
    if (!isAgentMeshError(error)) throw error;
    if (json)
      out.write(`${JSON.stringify({ ok: false, error: { code: error.code, message: error.message } })}\n`);
    ctx.io.stderr.write(`agentmesh runs ${verb}: ${error.code}: ${error.message}\n`);
    return 1;
  }
  out.write(
    json
      ? `${JSON.stringify({ ok: true, run_id: runId, approval_id: approvalId, decision: verb })}\n`
      : `${verb === 'approve' ? 'approved' : 'denied'} ${approvalId} of run ${runId}\n`,
  );
  return 0;
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
  try {
    await sendRunControl(bus, runId, verb === 'input' ? { kind: 'input', text: text! } : { kind: verb }, {
      prefix: ctx.prefix,
    });
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
      ? `${JSON.stringify({ ok: true, run_id: runId, [verb]: true })}\n`
      : `${done} run ${runId} (applied before its next model turn)\n`,
  );
  return 0;
}
