import {
  cancelRun,
  cancelTookEffect,
  forkPoints,
  formatRunTree,
  listRuns,
  runTree,
  showRun,
} from '@agentmesh/planner';
import { newRequestId, type Backend } from '@agentmesh/protocol';
import { intFlag, stringFlag, usageError as usage } from '../args.js';
import { suggestion } from '../suggest.js';
import { connectNats, tenantOption, type CommandContext } from '../context.js';
import { tenantCancel, tenantList, tenantShow, watchVerb } from './runs-tenant.js';
import { createHumanRenderer } from '../render.js';
import { isHitlVerb, runsHitlCommand } from './runs-hitl.js';
import { runsSpec } from '../specs/runs.js';
import { daemonLabels, runsTrigger } from './runs-trigger.js';

const usageError = (message: string) => usage(runsSpec, message);

export async function runsCommand(ctx: CommandContext): Promise<number> {
  const [verb, id, ...extra] = ctx.args.positionals;
  const tenant = tenantOption(ctx);
  if (isHitlVerb(verb)) {
    const bus = await connectNats(ctx, 'agentmesh-cli', { tenant });
    try {
      return await runsHitlCommand(ctx, runsSpec, bus, verb, ctx.args.positionals.slice(1));
    } finally {
      await bus.close();
    }
  }
  if (verb === 'fork') {
    if (id === undefined) throw usageError('runs fork needs a run id: agentmesh runs fork RUN_ID --at SEQ');
    if (extra.length > 0) throw usageError(`unexpected argument "${extra[0]}"`);
    // loaded on use: an embedded fork brings the whole mesh (catalog, workers), which the other verbs never need
    const { runsFork } = await import('./runs-fork.js');
    return runsFork(ctx, runsSpec, id);
  }
  if (verb !== 'list' && verb !== 'show' && verb !== 'cancel' && verb !== 'trigger' && verb !== 'watch')
    throw usageError(
      verb === undefined
        ? `runs needs a subcommand: ${runsSpec.verbs!.join(', ')}`
        : `unknown subcommand "${verb}"${suggestion(verb, runsSpec.verbs!)}: runs takes ${runsSpec.verbs!.join(', ')}`,
    );
  if (verb !== 'list' && id === undefined) throw usageError(`runs ${verb} needs a run id`);
  if (extra.length > 0 || (verb === 'list' && id !== undefined))
    throw usageError(`unexpected argument "${verb === 'list' ? id : extra[0]}"`);
  const state = stringFlag(ctx.args, 'state');
  if (state !== undefined && state !== 'running' && state !== 'finished')
    throw usageError(`--state must be running or finished, not "${state}"`);
  const bus = await connectNats(ctx, 'agentmesh-cli', { tenant });
  try {
    if (verb === 'trigger') return await runsTrigger(ctx, runsSpec, bus, id!);
    if (verb === 'watch') return await watchVerb(ctx, bus, tenant, id!);
    if (tenant !== undefined) {
      if (verb === 'list') return await tenantList(ctx, bus, tenant, state);
      if (verb === 'show') return await tenantShow(ctx, bus, tenant, id!);
      return await tenantCancel(ctx, bus, tenant, id!);
    }
    if (verb === 'list') return await listVerb(ctx, bus, state);
    if (verb === 'show') return await showVerb(ctx, bus, id!);
    return await cancelVerb(ctx, bus, id!);
  } finally {
    await bus.close();
  }
}

async function listVerb(
  ctx: CommandContext,
  bus: Backend,
  state: 'running' | 'finished' | undefined,
): Promise<number> {
  const out = ctx.io.stdout;
  const limit = intFlag(ctx.args, 'limit');
  const runs = await listRuns(bus, {
    prefix: ctx.prefix,
    ...(limit === undefined ? {} : { limit }),
    ...(state === undefined ? {} : { state }),
  });
  const daemons = await daemonLabels(ctx, bus, runs);
  if (ctx.args.values['json'] === true) out.write(`${JSON.stringify(runs)}\n`);
  else if (runs.length === 0) out.write('no runs\n');
  else
    for (const r of runs)
      out.write(
        `${r.run_id}  ${r.state === 'finished' ? (r.status ?? 'finished') : `${r.waiting ?? 'running'}${daemons.get(r.run_id) ?? ''}`}  ${r.accepted_at}  ` +
          `${r.planner_id}${r.takeovers ? ` (resumed ${r.takeovers}x)` : ''}  ${r.task ?? ''}\n`,
      );
  return 0;
}

async function showVerb(ctx: CommandContext, bus: Backend, id: string): Promise<number> {
  const out = ctx.io.stdout;
  const details = await showRun(bus, id, { prefix: ctx.prefix });
  if (details.record === null && details.events.length === 0 && details.transcript === null) {
    ctx.io.stderr.write(`agentmesh runs: no run "${id}" is known (no record, events or transcript)\n`);
    return 1;
  }
  const tree = await runTree(bus, id, { prefix: ctx.prefix, events: details.events });
  if (ctx.args.values['json'] === true) {
    out.write(`${JSON.stringify({ ...details, tree })}\n`);
    return 0;
  }
  const r = details.record;
  if (r)
    out.write(
      `run ${r.run_id}: ${r.state}${r.status ? ` (${r.status})` : ''}${r.waiting ? ` (${r.waiting})` : ''}, planner ${r.planner_id}, accepted ${r.accepted_at}` +
        `${r.finished_at ? `, finished ${r.finished_at}` : ''}${r.takeovers ? `, resumed ${r.takeovers}x` : ''}\n`,
    );
  const render = createHumanRenderer(out);
  for (const event of details.events) render(event);
  if (tree.children.length > 0) out.write(`tree:\n${formatRunTree(tree).join('\n')}\n`);
  const origin = r?.forked_from;
  if (origin) out.write(`forked from ${origin.run_id} after seq ${origin.seq}\n`);
  if (details.forks.length > 0)
    out.write(
      `forks:\n${details.forks.map((f) => `  ${f.run_id}  after seq ${f.seq}  ${f.status ?? f.state}  ${f.accepted_at}`).join('\n')}\n`,
    );
  const t = details.transcript;
  if (t) {
    out.write(
      `transcript: ${t.messages.length} messages, ${t.events.length} events, status ${t.status ?? '?'}\n`,
    );
    const points = forkPoints(details.events.length > 0 ? details.events : t.events);
    if (points.length > 0)
      out.write(
        `fork points (agentmesh runs fork ${id} --at SEQ): ${points.map((p) => `${p.seq} (${p.after_turn === 0 ? 'start' : `after turn ${p.after_turn}`})`).join(', ')}\n`,
      );
  }
  return 0;
}

async function cancelVerb(ctx: CommandContext, bus: Backend, id: string): Promise<number> {
  const reason = stringFlag(ctx.args, 'reason');
  const record = await cancelRun(bus, id, {
    prefix: ctx.prefix,
    requestId: stringFlag(ctx.args, 'request-id') ?? newRequestId(),
    ...(reason === undefined ? {} : { reason }),
  });
  if (record === null) {
    ctx.io.stderr.write(`agentmesh runs: no run "${id}" is known\n`);
    return 1;
  }
  const cancelled = cancelTookEffect(record);
  const message =
    record.queued === true
      ? `run ${id} was waiting in the queue of tenant ${record.tenant ?? 'default'}: cancelled, it will not start`
      : record.state === 'finished'
        ? `run ${id} already finished (${record.status ?? 'finished'}): nothing to cancel`
        : `cancel sent to run ${id} (planner ${record.planner_id})`;
  const json = { run_id: id, state: record.state, cancelled, ...(record.queued ? { queued: true } : {}) };
  ctx.io.stdout.write(ctx.args.values['json'] === true ? `${JSON.stringify(json)}\n` : `${message}\n`);
  return 0;
}
