import { cancelRun, listRuns, showRun } from '@agentmesh/planner';
import { CONNECTION_FLAGS, intFlag, stringFlag, usageError as usage, type CommandSpec } from '../args.js';
import { suggestion } from '../suggest.js';
import { connectNats, type CommandContext } from '../context.js';
import { createHumanRenderer } from '../render.js';
import { TRIGGER_FLAGS, daemonLabels, runsTrigger } from './runs-trigger.js';

export const runsSpec: CommandSpec = {
  name: 'runs',
  usage:
    'agentmesh runs list [--state running|finished] [--limit N] | agentmesh runs show ID | agentmesh runs cancel ID [--reason TEXT] | agentmesh runs trigger ID --kind K [--data JSON]',
  summary:
    'Lists the runs of the fleet on NATS (from their run records), shows one run (record, events and transcript, also after it finished), or cancels one.',
  flags: {
    ...CONNECTION_FLAGS,
    state: { type: 'string', value: 'STATE', description: 'list: only running or finished runs' },
    limit: { type: 'string', value: 'N', description: 'list: newest N runs (default 50)' },
    reason: { type: 'string', value: 'TEXT', description: 'cancel: the reason recorded with the cancel' },
    json: { type: 'boolean', description: 'print JSON' },
    ...TRIGGER_FLAGS,
  },
  verbs: ['list', 'show', 'cancel', 'trigger'],
};

const usageError = (message: string) => usage(runsSpec, message);

export async function runsCommand(ctx: CommandContext): Promise<number> {
  const [verb, id, ...extra] = ctx.args.positionals;
  if (verb !== 'list' && verb !== 'show' && verb !== 'cancel' && verb !== 'trigger')
    throw usageError(
      verb === undefined
        ? 'runs needs a subcommand: list, show or cancel'
        : `unknown subcommand "${verb}"${suggestion(verb, runsSpec.verbs!)}: runs takes list, show, cancel or trigger`,
    );
  if (verb !== 'list' && id === undefined) throw usageError(`runs ${verb} needs a run id`);
  if (extra.length > 0 || (verb === 'list' && id !== undefined))
    throw usageError(`unexpected argument "${verb === 'list' ? id : extra[0]}"`);
  const state = stringFlag(ctx.args, 'state');
  if (state !== undefined && state !== 'running' && state !== 'finished')
    throw usageError(`--state must be running or finished, not "${state}"`);
  const json = ctx.args.values['json'] === true;
  const out = ctx.io.stdout;
  const bus = await connectNats(ctx, 'agentmesh-cli');
  try {
    if (verb === 'trigger') return await runsTrigger(ctx, runsSpec, bus, id!);
    if (verb === 'list') {
      const limit = intFlag(ctx.args, 'limit');
      const runs = await listRuns(bus, {
        prefix: ctx.prefix,
        ...(limit === undefined ? {} : { limit }),
        ...(state === undefined ? {} : { state }),
      });
      const daemons = await daemonLabels(ctx, bus, runs);
      if (json) out.write(`${JSON.stringify(runs)}\n`);
      else if (runs.length === 0) out.write('no runs\n');
      else
        for (const r of runs)
          out.write(
            `${r.run_id}  ${r.state === 'finished' ? (r.status ?? 'finished') : `running${daemons.get(r.run_id) ?? ''}`}  ${r.accepted_at}  ` +
              `${r.planner_id}${r.takeovers ? ` (resumed ${r.takeovers}x)` : ''}  ${r.task ?? ''}\n`,
          );
      return 0;
    }
    if (verb === 'show') {
      const details = await showRun(bus, id!, { prefix: ctx.prefix });
      if (details.record === null && details.events.length === 0 && details.transcript === null) {
        ctx.io.stderr.write(`agentmesh runs: no run "${id}" is known (no record, events or transcript)\n`);
        return 1;
      }
      if (json) {
        out.write(`${JSON.stringify(details)}\n`);
        return 0;
      }
      const r = details.record;
      if (r)
        out.write(
          `run ${r.run_id}: ${r.state}${r.status ? ` (${r.status})` : ''}, planner ${r.planner_id}, accepted ${r.accepted_at}` +
            `${r.finished_at ? `, finished ${r.finished_at}` : ''}${r.takeovers ? `, resumed ${r.takeovers}x` : ''}\n`,
        );
      const render = createHumanRenderer(out);
      for (const event of details.events) render(event);
      const t = details.transcript;
      if (t)
        out.write(
          `transcript: ${t.messages.length} messages, ${t.events.length} events, status ${t.status ?? '?'}\n`,
        );
      return 0;
    }
    const record = await cancelRun(bus, id!, {
      prefix: ctx.prefix,
      ...(stringFlag(ctx.args, 'reason') === undefined ? {} : { reason: stringFlag(ctx.args, 'reason')! }),
    });
    if (record === null) {
      ctx.io.stderr.write(`agentmesh runs: no run "${id}" is known\n`);
      return 1;
    }
    const message =
      record.state === 'finished'
        ? `run ${id} already finished (${record.status ?? 'finished'}): nothing to cancel`
        : `cancel sent to run ${id} (planner ${record.planner_id})`;
    out.write(
      json
        ? `${JSON.stringify({ run_id: id, state: record.state, cancelled: record.state !== 'finished' })}\n`
        : `${message}\n`,
    );
    return 0;
  } finally {
    await bus.close();
  }
}
