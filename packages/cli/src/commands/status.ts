import {
  AgentMeshError,
  CatalogListReplySchema,
  ErrorCode,
  ServiceName,
  isAgentMeshError,
  openRunIntake,
  requestJson,
  streamNames,
  subjects,
  type Backend,
} from '@agentmesh/protocol';
import { RUNNING_LOAD_PREFIX, queuedRuns, tenantQueues } from '@agentmesh/planner';
import { z } from 'zod';
import { connectNats, type CommandContext } from '../context.js';
import { plural } from '../render.js';
import { formatTable } from '../table.js';

const StatsSchema = z
  .object({
    started: z.string(),
    endpoints: z.array(z.object({ data: z.unknown().optional() }).passthrough()).optional(),
  })
  .passthrough();

export interface ActorRow {
  kind: string;
  id: string;
  worker_id?: string;
  host?: string;
  pid?: number;
  tools?: number;
  in_flight?: number;
  /** A planner's runs in progress by tenant (fair intake only). */
  running_by_tenant?: Record<string, number>;
  uptime_s?: number;
  version: string;
  /** The build a planner announces (`agentmesh planner --version-tag`; default its version). */
  version_tag?: string;
  /** The newest durable record format a planner reads and writes. */
  schema_version?: number;
}

/** Which planners run which build: one entry per version tag and schema version, for rolling upgrades. */
export interface VersionGroup {
  version_tag: string;
  schema_version: number | null;
  planners: string[];
}

/** Groups the planners by the build they announce, newest-looking tag last (sorted by tag). */
export function versionGroups(actors: readonly ActorRow[]): VersionGroup[] {
  const groups = new Map<string, VersionGroup>();
  for (const a of actors) {
    if (a.kind !== ServiceName.Planner.replace(/^agentmesh-/, '')) continue;
    const tag = a.version_tag ?? a.version;
    const schema = a.schema_version ?? null;
    const key = `${tag}\0${schema}`;
    const group = groups.get(key) ?? { version_tag: tag, schema_version: schema, planners: [] };
    group.planners.push(a.worker_id ?? a.id);
    groups.set(key, group);
  }
  return [...groups.values()].sort((x, y) => x.version_tag.localeCompare(y.version_tag));
}

/** One tenant's runs across the fleet: waiting in the fair intake and running on the planners. */
export interface TenantRow {
  tenant: string;
  queued: number;
  running: number;
}

async function actorRows(bus: Backend): Promise<ActorRow[]> {
  const services = await bus.discover().catch((error: unknown) => {
    if (isAgentMeshError(error, ErrorCode.NoResponders) || /no responders/i.test(String(error))) return [];
    throw error;
  });
  return Promise.all(
    services.map(async (s) => {
      const workerId = s.metadata['worker_id'] ?? s.metadata['planner_id'];
      const parts = workerId ? /^(.+)-(\d+)-[0-9a-f]{6}$/.exec(workerId) : null;
      const stats = await requestJson(bus, `$SRV.STATS.${s.name}.${s.id}`, {}, StatsSchema, {
        timeoutMs: 1000,
      }).catch(() => undefined);
      const loads = (stats?.endpoints ?? []).map((e) => (e.data ?? {}) as Record<string, unknown>);
      const inFlight = loads.map((l) => l['in_flight']).find((v): v is number => typeof v === 'number');
      const byTenant = runningByTenant(loads);
      const tools = s.metadata['tools'];
      const versionTag = s.metadata['version_tag'];
      const schema = Number(s.metadata['schema_version']);
      return {
        kind: s.name.replace(/^agentmesh-/, ''),
        id: s.id,
        ...(workerId ? { worker_id: workerId } : {}),
        ...(parts ? { host: parts[1]!, pid: Number(parts[2]) } : {}),
        ...(tools !== undefined ? { tools: Number(tools) } : {}),
        ...(inFlight !== undefined ? { in_flight: inFlight } : {}),
        ...(byTenant === undefined ? {} : { running_by_tenant: byTenant }),
        ...(stats
          ? { uptime_s: Math.max(0, Math.round((Date.now() - Date.parse(stats.started)) / 1000)) }
          : {}),
        version: s.version,
        ...(versionTag === undefined ? {} : { version_tag: versionTag }),
        ...(Number.isInteger(schema) && schema > 0 ? { schema_version: schema } : {}),
      };
    }),
  );
}

function runningByTenant(loads: Record<string, unknown>[]): Record<string, number> | undefined {
  let out: Record<string, number> | undefined;
  for (const load of loads)
    for (const [key, value] of Object.entries(load))
      if (key.startsWith(RUNNING_LOAD_PREFIX) && typeof value === 'number')
        (out ??= {})[key.slice(RUNNING_LOAD_PREFIX.length)] = value;
  return out;
}

/** Queued runs per tenant from the fair intake's consumers, running runs summed over the planners' loads. */
function tenantRows(
  actors: ActorRow[],
  consumers: { name: string; pending: number; ack_pending: number; redelivered: number }[],
): TenantRow[] {
  const queues = tenantQueues(consumers.map((c) => ({ ...c, ackPending: c.ack_pending })));
  const rows = new Map<string, TenantRow>();
  const row = (tenant: string) => {
    let r = rows.get(tenant);
    if (r === undefined) rows.set(tenant, (r = { tenant, queued: 0, running: 0 }));
    return r;
  };
  for (const [tenant, q] of queues) row(tenant).queued = queuedRuns(q);
  for (const a of actors)
    for (const [tenant, n] of Object.entries(a.running_by_tenant ?? {})) row(tenant).running += n;
  return [...rows.values()].sort((a, b) => a.tenant.localeCompare(b.tenant));
}

function uptime(seconds: number | undefined): string {
  if (seconds === undefined) return '-';
  if (seconds < 120) return `${seconds}s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)}m`;
  return `${Math.round(seconds / 3600)}h`;
}

async function queueReport(bus: Backend, prefix: string) {
  const names = streamNames(prefix);
  const streams: Record<string, { messages: number; consumers: number } | null> = {};
  for (const stream of [names.runs, names.events]) {
    const facts = await bus.streamFacts(stream).catch(() => undefined);
    streams[stream] = facts ? { messages: facts.messages, consumers: facts.consumers } : null;
  }
  const consumers: { name: string; pending: number; ack_pending: number; redelivered: number }[] = [];
  if (streams[names.runs])
    for (const c of await (await openRunIntake(bus, prefix)).consumers())
      consumers.push({
        name: c.name,
        pending: c.pending,
        ack_pending: c.ackPending,
        redelivered: c.redelivered,
      });
  return { streams, run_consumers: consumers };
}

function printHuman(
  ctx: CommandContext,
  actors: ActorRow[],
  tools: number | string,
  queue: Awaited<ReturnType<typeof queueReport>>,
  tenants: TenantRow[],
) {
  const o = ctx.io.stdout;
  o.write(`NATS ${ctx.natsUrl} (prefix ${ctx.prefix})\n`);
  const counts = new Map<string, number>();
  for (const a of actors) counts.set(a.kind, (counts.get(a.kind) ?? 0) + 1);
  o.write(`actors: ${[...counts].map(([k, n]) => `${n} ${k}`).join(', ') || 'none running'}\n`);
  const workers = actors.filter((a) => a.kind === ServiceName.ToolWorker.replace(/^agentmesh-/, ''));
  if (workers.length > 0)
    o.write(
      formatTable(
        ['WORKER', 'HOST', 'PID', 'TOOLS', 'IN FLIGHT', 'UPTIME', 'VERSION'],
        workers.map((w) => [
          w.worker_id ?? w.id,
          w.host ?? '-',
          String(w.pid ?? '-'),
          String(w.tools ?? '-'),
          String(w.in_flight ?? '-'),
          uptime(w.uptime_s),
          w.version,
        ]),
      ),
    );
  for (const a of actors.filter((x) => !workers.includes(x))) {
    const load = a.in_flight === undefined ? '' : `, ${plural(a.in_flight, 'run')} in flight`;
    o.write(`  ${a.kind} ${a.worker_id ?? a.id}, up ${uptime(a.uptime_s)}${load}, v${a.version}\n`);
  }
  const versions = versionGroups(actors);
  if (versions.length > 0)
    o.write(
      `versions: ${versions.length === 1 ? 'every planner runs one build' : `${versions.length} builds run side by side`}\n`,
    );
  for (const v of versions)
    o.write(
      `  ${v.version_tag}${v.schema_version === null ? '' : ` (schema ${v.schema_version})`}: ${plural(v.planners.length, 'planner')} (${v.planners.join(', ')})\n`,
    );
  o.write(`tools: ${typeof tools === 'number' ? plural(tools, 'tool') + ' in the catalog' : tools}\n`);
  for (const [stream, info] of Object.entries(queue.streams))
    o.write(
      `stream ${stream}: ${info ? `${plural(info.messages, 'message')}, ${plural(info.consumers, 'consumer')}` : 'not created yet (a planner creates it)'}\n`,
    );
  for (const c of queue.run_consumers)
    o.write(
      `  consumer ${c.name}: ${c.pending} pending, ${c.ack_pending} in progress, ${c.redelivered} redelivered\n`,
    );
  if (tenants.length > 0)
    o.write(
      formatTable(
        ['TENANT', 'QUEUED', 'RUNNING'],
        tenants.map((t) => [t.tenant, String(t.queued), String(t.running)]),
      ),
    );
}

export async function statusCommand(ctx: CommandContext): Promise<number> {
  let bus: Backend;
  try {
    bus = await connectNats(ctx, 'agentmesh-cli');
  } catch (error) {
    const e = AgentMeshError.from(error);
    if (e.code !== ErrorCode.Unavailable) throw e;
    ctx.io.stderr.write(`agentmesh status: NATS is unreachable: ${e.message}\n`);
    return 1;
  }
  try {
    const actors = await actorRows(bus);
    const queue = await queueReport(bus, ctx.prefix);
    const tools = await requestJson(bus, subjects(ctx.prefix).catalogList, {}, CatalogListReplySchema, {
      timeoutMs: 2000,
    })
      .then((r) => r.tools.length)
      .catch(() => 'no catalog answers (start agentmesh catalog)');
    const tenants = tenantRows(actors, queue.run_consumers);
    if (ctx.args.values['json'] === true)
      ctx.io.stdout.write(
        `${JSON.stringify({ nats: ctx.natsUrl, prefix: ctx.prefix, actors, versions: versionGroups(actors), services: actors.map((a) => ({ name: `agentmesh-${a.kind}`, id: a.id, version: a.version })), tools, ...queue, tenants })}\n`,
      );
    else printHuman(ctx, actors, tools, queue, tenants);
    return 0;
  } finally {
    await bus.close();
  }
}
