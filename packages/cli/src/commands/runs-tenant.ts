/** `agentmesh runs list|show|cancel|watch --tenant NAME`: the same views through a tenant's API (docs/tenancy.md). */
import { followRun, followTenantRun, tenantRunHistory } from '@agentmesh/planner';
import {
  TenantCancelReplySchema,
  TenantRunShowReplySchema,
  TenantRunsListReplySchema,
  isAgentMeshError,
  newRequestId,
  requestJson,
  tenantSubjects,
  type Backend,
  type RunEvent,
  type TenantRunRecord,
} from '@agentmesh/protocol';
import { intFlag, stringFlag } from '../args.js';
import type { CommandContext } from '../context.js';
import { createHumanRenderer } from '../render.js';

const TIMEOUT = { timeoutMs: 10_000 };

/** One line of `runs list` for a record. */
export function runLine(r: TenantRunRecord, daemon = ''): string {
  const status =
    r.state === 'finished'
      ? String(r['status'] ?? 'finished')
      : `${String(r['waiting'] ?? 'running')}${daemon}`;
  const takeovers =
    typeof r['takeovers'] === 'number' && r['takeovers'] > 0 ? ` (resumed ${r['takeovers']}x)` : '';
  return `${r.run_id}  ${status}  ${r.accepted_at}  ${String(r['planner_id'] ?? '')}${takeovers}  ${String(r['task'] ?? '')}\n`;
}

export async function tenantList(
  ctx: CommandContext,
  bus: Backend,
  tenant: string,
  state: 'running' | 'finished' | undefined,
): Promise<number> {
  const limit = intFlag(ctx.args, 'limit');
  const { runs } = await requestJson(
    bus,
    tenantSubjects(ctx.prefix, tenant).runsList,
    {
      ...(state === undefined ? {} : { state }),
      ...(limit === undefined ? {} : { limit: Math.max(1, limit) }),
    },
    TenantRunsListReplySchema,
    TIMEOUT,
  );
  const out = ctx.io.stdout;
  if (ctx.args.values['json'] === true) out.write(`${JSON.stringify(runs)}\n`);
  else if (runs.length === 0) out.write('no runs\n');
  else for (const r of runs) out.write(runLine(r));
  return 0;
}

/** Every stored event of a tenant's run, page by page. */
async function tenantEvents(
  ctx: CommandContext,
  bus: Backend,
  tenant: string,
  runId: string,
): Promise<RunEvent[]> {
  const events: RunEvent[] = [];
  for (let after = 0; ;) {
    const page = await tenantRunHistory(bus, tenant, runId, { prefix: ctx.prefix, afterSeq: after });
    events.push(...page.events);
    if (!page.more) return events;
    after = page.last_seq;
  }
}

export async function tenantShow(
  ctx: CommandContext,
  bus: Backend,
  tenant: string,
  runId: string,
): Promise<number> {
  let shown;
  try {
    shown = await requestJson(
      bus,
      tenantSubjects(ctx.prefix, tenant).run(runId, 'show'),
      {},
      TenantRunShowReplySchema,
      TIMEOUT,
    );
  } catch (error) {
    if (!isAgentMeshError(error, 'not_found')) throw error;
    ctx.io.stderr.write(`agentmesh runs: no run "${runId}" is known for tenant "${tenant}"\n`);
    return 1;
  }
  const events = await tenantEvents(ctx, bus, tenant, runId);
  const out = ctx.io.stdout;
  if (ctx.args.values['json'] === true) {
    out.write(`${JSON.stringify({ ...shown, events })}\n`);
    return 0;
  }
  const r = shown.record;
  out.write(
    `run ${r.run_id}: ${r.state}${r['status'] ? ` (${String(r['status'])})` : ''}${r['waiting'] ? ` (${String(r['waiting'])})` : ''}, accepted ${r.accepted_at}` +
      `${r['finished_at'] ? `, finished ${String(r['finished_at'])}` : ''}\n`,
  );
  const render = createHumanRenderer(out);
  for (const event of events) render(event);
  const t = shown.transcript;
  if (t) out.write(`transcript: ${t.messages} messages, ${t.events} events, status ${t.status ?? '?'}\n`);
  return 0;
}

export async function tenantCancel(
  ctx: CommandContext,
  bus: Backend,
  tenant: string,
  runId: string,
): Promise<number> {
  const reason = stringFlag(ctx.args, 'reason');
  let reply;
  try {
    reply = await requestJson(
      bus,
      tenantSubjects(ctx.prefix, tenant).run(runId, 'cancel'),
      {
        request_id: stringFlag(ctx.args, 'request-id') ?? newRequestId(),
        ...(reason === undefined ? {} : { reason }),
      },
      TenantCancelReplySchema,
      TIMEOUT,
    );
  } catch (error) {
    if (!isAgentMeshError(error, 'not_found')) throw error;
    ctx.io.stderr.write(`agentmesh runs: no run "${runId}" is known for tenant "${tenant}"\n`);
    return 1;
  }
  const message =
    reply.queued === true
      ? `run ${runId} was waiting in the queue of tenant ${tenant}: cancelled, it will not start`
      : reply.cancelled
        ? `cancel sent to run ${runId}`
        : `run ${runId} already finished (${reply.status ?? 'finished'}): nothing to cancel`;
  ctx.io.stdout.write(ctx.args.values['json'] === true ? `${JSON.stringify(reply)}\n` : `${message}\n`);
  return 0;
}

/** `runs watch ID`: the run's events from the first, until its final one (exit 0 when it ended done). */
export async function watchVerb(
  ctx: CommandContext,
  bus: Backend,
  tenant: string | undefined,
  runId: string,
): Promise<number> {
  const json = ctx.args.values['json'] === true;
  const human = createHumanRenderer(ctx.io.stdout);
  const onEvent = (event: RunEvent) =>
    json ? ctx.io.stdout.write(`${JSON.stringify(event)}\n`) : human(event);
  const final =
    tenant === undefined
      ? await followRun(bus, runId, { prefix: ctx.prefix, onEvent })
      : await followTenantRun(bus, runId, { prefix: ctx.prefix, tenant, onEvent });
  return final.type === 'run.completed' && final.status === 'done' ? 0 : 1;
}
