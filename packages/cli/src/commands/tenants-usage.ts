import { tenantUsageReport, type TenantUsageReport } from '@agentmesh/planner';
import { stringFlag, usageError as usage } from '../args.js';
import { connectNats, type CommandContext } from '../context.js';
import { embeddedDataDir, SessionFilesBus } from '../sessions-dir.js';
import { tenantsSpec } from '../specs/tenants.js';
import { formatTable } from '../table.js';

const usageError = (message: string) => usage(tenantsSpec, message);

/** `agentmesh tenants usage [NAME]`: usage today against limits, per tenant. */
export async function tenantsUsageCommand(ctx: CommandContext): Promise<number> {
  const [verb, name, extra] = ctx.args.positionals;
  if (verb !== 'usage')
    throw usageError(
      verb === undefined
        ? 'tenants needs a subcommand: usage'
        : `unknown subcommand "${verb}": tenants takes usage`,
    );
  if (extra !== undefined) throw usageError(`unexpected argument "${extra}"`);
  const embedded = ctx.natsUrl === undefined;
  const bus = embedded
    ? new SessionFilesBus(embeddedDataDir({ dataDir: stringFlag(ctx.args, 'data-dir') }))
    : await connectNats(ctx, 'agentmesh-cli');
  try {
    const report = await tenantUsageReport(bus, {
      ...(embedded ? {} : { prefix: ctx.prefix }),
      tenants: ctx.config.tenants,
      only: name,
    });
    if (ctx.args.values['json'] === true) ctx.io.stdout.write(`${JSON.stringify(report)}\n`);
    else ctx.io.stdout.write(renderUsage(report));
    return 0;
  } finally {
    await bus.close();
  }
}

const of = (used: string, limit: number | undefined, unit = '') =>
  limit ? `${used} / ${unit}${limit}` : `${used} (no limit)`;

function renderUsage(report: readonly TenantUsageReport[]): string {
  if (report.length === 0) return 'no tenants configured and no usage today\n';
  const rows = report.map((r) => [
    r.tenant,
    of(String(r.tokens), r.limits.daily_tokens),
    of(`$${r.cost_usd.toFixed(4)}`, r.limits.daily_cost_usd, '$'),
    r.limits.runs_per_minute ? `${r.runs_this_minute} / ${r.limits.runs_per_minute}` : '(no limit)',
    String(r.turns),
  ]);
  return `usage on ${report[0]!.day} (UTC)\n${formatTable(['tenant', 'tokens', 'cost', 'runs this minute', 'model turns'], rows)}`;
}
