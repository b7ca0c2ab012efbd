import type { z } from 'zod';
import { SessionStore, openSessionStores, type SessionRecord, type SessionSummary } from '@agentmesh/planner';
import {
  ErrorCode,
  TenantSessionDoneReplySchema,
  TenantSessionShowReplySchema,
  TenantSessionsListReplySchema,
  isAgentMeshError,
  requestJson,
  tenantSubjects,
  type Backend,
  type TenantSessionVerb,
} from '@agentmesh/protocol';
import { stringFlag, usageError as usage } from '../args.js';
import { connectNats, tenantOption, type CommandContext } from '../context.js';
import { embeddedDataDir, SessionFilesBus } from '../sessions-dir.js';
import { suggestion } from '../suggest.js';
import { sessionsSpec } from '../specs/sessions.js';

const usageError = (message: string) => usage(sessionsSpec, message);

/** What `agentmesh sessions` does with sessions: the store itself, or a tenant's API (`--tenant` on NATS). */
interface Sessions {
  list(tenant: string): Promise<SessionSummary[]>;
  get(tenant: string, session: string): Promise<SessionRecord | undefined>;
  fork(tenant: string, from: string, to: string): Promise<unknown>;
  delete(tenant: string, session: string): Promise<unknown>;
}

async function directStore(bus: Backend, prefix: string | undefined): Promise<Sessions> {
  const { blobs, meta } = await openSessionStores(bus, prefix);
  return new SessionStore(blobs, meta);
}

function tenantSessions(bus: Backend, prefix: string, tenant: string): Sessions {
  const s = tenantSubjects(prefix, tenant);
  const ask = <S extends z.ZodType>(verb: TenantSessionVerb, body: unknown, schema: S) =>
    requestJson(bus, s.sessions(verb), body, schema, { timeoutMs: 10_000 });
  return {
    list: async () => (await ask('list', {}, TenantSessionsListReplySchema)).sessions as SessionSummary[],
    get: async (_tenant, session) => {
      try {
        return (await ask('show', { session }, TenantSessionShowReplySchema))
          .session as unknown as SessionRecord;
      } catch (error) {
        if (isAgentMeshError(error, ErrorCode.NotFound)) return undefined;
        throw error;
      }
    },
    fork: (_tenant, from, to) => ask('fork', { session: from, to }, TenantSessionDoneReplySchema),
    delete: (_tenant, session) => ask('delete', { session }, TenantSessionDoneReplySchema),
  };
}
const OPERANDS: Record<string, number> = { list: 0, show: 1, fork: 2, delete: 1 };

export async function sessionsCommand(ctx: CommandContext): Promise<number> {
  const [verb, ...operands] = ctx.args.positionals;
  const wanted = verb === undefined ? undefined : OPERANDS[verb];
  if (verb === undefined || wanted === undefined)
    throw usageError(
      verb === undefined
        ? 'sessions needs a subcommand: list, show, fork or delete'
        : `unknown subcommand "${verb}"${suggestion(verb, sessionsSpec.verbs!)}: sessions takes list, show, fork or delete`,
    );
  if (operands.length < wanted)
    throw usageError(`sessions ${verb} needs ${wanted === 2 ? 'a session id and a new id' : 'a session id'}`);
  if (operands.length > wanted) throw usageError(`unexpected argument "${operands[wanted]}"`);
  const viaApi = tenantOption(ctx);
  const tenant = viaApi ?? 'default';
  const json = ctx.args.values['json'] === true;
  const embedded = ctx.natsUrl === undefined;
  const bus = embedded
    ? new SessionFilesBus(embeddedDataDir({ dataDir: stringFlag(ctx.args, 'data-dir') }))
    : await connectNats(ctx, 'agentmesh-cli', { tenant: viaApi });
  try {
    const store =
      viaApi === undefined || embedded
        ? await directStore(bus, embedded ? undefined : ctx.prefix)
        : tenantSessions(bus, ctx.prefix, viaApi);
    const [id, newId] = operands as [string, string];
    try {
      return await runVerb(ctx, store, { verb, tenant, id, newId, json });
    } catch (error) {
      if (!isAgentMeshError(error)) throw error;
      ctx.io.stderr.write(`agentmesh sessions ${verb}: ${error.code}: ${error.message}\n`);
      return 1;
    }
  } finally {
    await bus.close();
  }
}

/** One verb of `agentmesh sessions` against `store`, printed as text or JSON; the exit code. */
async function runVerb(
  ctx: CommandContext,
  store: Sessions,
  op: { verb: string; tenant: string; id: string; newId: string; json: boolean },
): Promise<number> {
  const { verb, tenant, id, newId, json } = op;
  const out = ctx.io.stdout;
  if (verb === 'list') {
    const sessions = await store.list(tenant);
    if (json) out.write(`${JSON.stringify(sessions)}\n`);
    else if (sessions.length === 0) out.write(`no sessions for tenant "${tenant}"\n`);
    else
      for (const s of sessions)
        out.write(`${s.session}  ${s.runs} run(s)  ${s.messages} message(s)  ${s.updated_at}\n`);
  } else if (verb === 'show') {
    const record = await store.get(tenant, id);
    if (record === undefined) {
      ctx.io.stderr.write(`agentmesh sessions: no session "${id}" for tenant "${tenant}"\n`);
      return 1;
    }
    if (json) out.write(`${JSON.stringify(record)}\n`);
    else printSession(out, record);
  } else if (verb === 'fork') {
    await store.fork(tenant, id, newId);
    out.write(
      json ? `${JSON.stringify({ ok: true, session: newId, from: id })}\n` : `forked ${id} as ${newId}\n`,
    );
  } else {
    await store.delete(tenant, id);
    out.write(json ? `${JSON.stringify({ ok: true, deleted: id })}\n` : `deleted session ${id}\n`);
  }
  return 0;
}

function printSession(out: CommandContext['io']['stdout'], record: SessionRecord): void {
  out.write(
    `session ${record.session}: ${record.runs.length} run(s) (${record.runs.join(', ')}), updated ${record.updated_at}\n`,
  );
  for (const m of record.messages) {
    const calls =
      m.role === 'assistant' ? (m.tool_calls ?? []).map((c) => ` [calls ${c.name}]`).join('') : '';
    const who = m.role === 'tool' ? `tool ${m.name}` : m.role;
    out.write(`${who}: ${m.content.replace(/\s+/g, ' ').slice(0, 300)}${calls}\n`);
  }
}
