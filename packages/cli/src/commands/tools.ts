import {
  AgentMeshError,
  ErrorCode,
  isAgentMeshError,
  CatalogListReplySchema,
  CatalogSearchReplySchema,
  requestJson,
  subjects,
  type Backend,
} from '@agentmesh/protocol';
import { intFlag, stringFlag, usageError } from '../args.js';
import { plural } from '../render.js';
import { suggestion } from '../suggest.js';
import { connectNats, tenantOption, type CommandContext } from '../context.js';
import { startEmbedded } from '../embedded.js';
import { toolsSpec } from '../specs/tools.js';

async function withCatalogBus<T>(ctx: CommandContext, fn: (bus: Backend) => Promise<T>): Promise<T> {
  if (ctx.natsUrl !== undefined) {
    const bus = await connectNats(ctx, 'agentmesh-cli', { tenant: tenantOption(ctx) });
    try {
      return await fn(bus);
    } catch (error) {
      if (!isAgentMeshError(error, ErrorCode.NoResponders) && !isAgentMeshError(error, ErrorCode.Timeout))
        throw error;
      throw new AgentMeshError(
        ErrorCode.NoResponders,
        `no catalog answers on ${subjects(ctx.prefix).catalogList}: start one (agentmesh catalog --nats ${ctx.natsUrl})`,
        { cause: error },
      );
    } finally {
      await bus.close();
    }
  }
  const mesh = await startEmbedded({
    config: ctx.config,
    logger: ctx.logger,
    workspace: stringFlag(ctx.args, 'workspace', 'AGENTMESH_WORKSPACE'),
  });
  try {
    return await fn(mesh.bus);
  } finally {
    await mesh.stop();
  }
}

export async function toolsCommand(ctx: CommandContext): Promise<number> {
  const [verb, ...rest] = ctx.args.positionals;
  const tenant = tenantOption(ctx);
  const s = subjects(ctx.prefix);
  const catalog =
    tenant === undefined
      ? { list: s.catalogList, search: s.catalogSearch }
      : { list: s.tenant(tenant).catalog('list'), search: s.tenant(tenant).catalog('search') };
  if (verb === 'list') return listTools(ctx, catalog.list);
  if (verb === 'search') return searchTools(ctx, catalog.search, rest.join(' '));
  throw usageError(
    toolsSpec,
    verb === undefined
      ? 'tools needs a subcommand: list or search'
      : `unknown subcommand "${verb}"${suggestion(verb, toolsSpec.verbs!)}: tools takes list or search`,
  );
}

/** `agentmesh tools list`: the catalog's tools, as a table or JSON. */
async function listTools(ctx: CommandContext, subject: string): Promise<number> {
  const loading = stringFlag(ctx.args, 'loading');
  const namespace = stringFlag(ctx.args, 'namespace');
  const reply = await withCatalogBus(ctx, (bus) =>
    requestJson(
      bus,
      subject,
      { ...(namespace ? { namespace } : {}), ...(loading ? { loading } : {}) },
      CatalogListReplySchema,
    ),
  );
  const out = ctx.io.stdout;
  if (ctx.args.values['json'] === true) out.write(`${JSON.stringify(reply.tools)}\n`);
  else {
    const width = Math.max(4, ...reply.tools.map((t) => t.name.length));
    for (const t of reply.tools)
      out.write(`${t.name.padEnd(width)}  ${t.loading.padEnd(8)}  ${t.workers}w  ${t.description}\n`);
    out.write(`${plural(reply.tools.length, 'tool')}\n`);
  }
  return 0;
}

/** `agentmesh tools search QUERY`: the catalog's best matches with their scores, or JSON. */
async function searchTools(ctx: CommandContext, subject: string, query: string): Promise<number> {
  const limit = intFlag(ctx.args, 'limit');
  const strategy = stringFlag(ctx.args, 'strategy');
  const reply = await withCatalogBus(ctx, (bus) =>
    requestJson(
      bus,
      subject,
      {
        query,
        deferred_only: false,
        ...(strategy ? { strategy } : {}),
        ...(limit === undefined ? {} : { limit }),
      },
      CatalogSearchReplySchema,
    ),
  );
  const out = ctx.io.stdout;
  if (ctx.args.values['json'] === true) out.write(`${JSON.stringify(reply.results)}\n`);
  else {
    for (const r of reply.results) out.write(`${r.score.toFixed(3)}  ${r.name}  ${r.description}\n`);
    if (reply.results.length === 0) out.write('no tool matches\n');
  }
  return 0;
}
