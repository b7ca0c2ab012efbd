import { SessionStore, openSessionStores } from '@agentmesh/planner';
import { isAgentMeshError } from '@agentmesh/protocol';
import { stringFlag, usageError as usage } from '../args.js';
import { connectNats, type CommandContext } from '../context.js';
import { embeddedDataDir, SessionFilesBus } from '../sessions-dir.js';
import { suggestion } from '../suggest.js';
import { sessionsSpec } from '../specs/sessions.js';

const usageError = (message: string) => usage(sessionsSpec, message);
const OPERANDS: Record<string, number> = { list: 0, show: 1, fork: 2, delete: 1 };

export async function sessionsCommand(ctx: CommandContext): Promise<number> {
  const [verb, ...operands] = ctx.args.positionals;
  const wanted = verb === undefined ? undefined : OPERANDS[verb];
  if (wanted === undefined)
    throw usageError(
      verb === undefined
        ? 'sessions needs a subcommand: list, show, fork or delete'
        : `unknown subcommand "${verb}"${suggestion(verb, sessionsSpec.verbs!)}: sessions takes list, show, fork or delete`,
    );
  if (operands.length < wanted)
    throw usageError(`sessions ${verb} needs ${wanted === 2 ? 'a session id and a new id' : 'a session id'}`);
  if (operands.length > wanted) throw usageError(`unexpected argument "${operands[wanted]}"`);
  const tenant = stringFlag(ctx.args, 'tenant') ?? 'default';
  const json = ctx.args.values['json'] === true;
  const out = ctx.io.stdout;
  const embedded = ctx.natsUrl === undefined;
  const bus = embedded
    ? new SessionFilesBus(embeddedDataDir({ dataDir: stringFlag(ctx.args, 'data-dir') }))
    : await connectNats(ctx, 'agentmesh-cli');
  try {
    const { blobs, meta } = await openSessionStores(bus, embedded ? undefined : ctx.prefix);
    const store = new SessionStore(blobs, meta);
    const [id, newId] = operands as [string, string];
    try {
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
        else {
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
    } catch (error) {
      if (!isAgentMeshError(error)) throw error;
      ctx.io.stderr.write(`agentmesh sessions ${verb}: ${error.code}: ${error.message}\n`);
      return 1;
    }
  } finally {
    await bus.close();
  }
}
