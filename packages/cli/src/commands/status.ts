import {
  CatalogListReplySchema,
  discoverServices,
  openRunIntake,
  requestJson,
  streamNames,
  subjects,
} from '@agentmesh/protocol';
import { CONNECTION_FLAGS, type CommandSpec } from '../args.js';
import { connectNats, type CommandContext } from '../context.js';

export const statusSpec: CommandSpec = {
  name: 'status',
  usage: 'agentmesh status [flags]',
  summary: 'Shows the fleet on NATS: live actors (service discovery), tools, and the run queue.',
  flags: { ...CONNECTION_FLAGS, json: { type: 'boolean', description: 'print JSON' } },
};

export async function statusCommand(ctx: CommandContext): Promise<number> {
  const bus = await connectNats(ctx, 'agentmesh-cli');
  try {
    const services = await discoverServices(bus);
    const names = streamNames(ctx.prefix);
    const streams: Record<string, unknown> = {};
    for (const stream of [names.runs, names.events]) {
      const facts = await bus.streamFacts(stream).catch(() => undefined);
      streams[stream] = facts
        ? { messages: facts.messages, bytes: facts.bytes, consumers: facts.consumers }
        : 'missing';
    }
    const consumers: { name: string; pending: number; ack_pending: number; redelivered: number }[] = [];
    if (streams[names.runs] !== 'missing')
      for (const c of await (await openRunIntake(bus, ctx.prefix)).consumers())
        consumers.push({
          name: c.name,
          pending: c.pending,
          ack_pending: c.ackPending,
          redelivered: c.redelivered,
        });
    const tools = await requestJson(bus, subjects(ctx.prefix).catalogList, {}, CatalogListReplySchema, {
      timeoutMs: 2000,
    })
      .then((r) => r.tools.length)
      .catch((e: unknown) => `unavailable (${(e as Error).message})`);
    const report = {
      nats: ctx.natsUrl,
      prefix: ctx.prefix,
      services,
      streams,
      run_consumers: consumers,
      tools,
    };
    if (ctx.args.values['json'] === true) ctx.io.stdout.write(`${JSON.stringify(report)}\n`);
    else {
      const o = ctx.io.stdout;
      o.write(`NATS ${ctx.natsUrl} (prefix ${ctx.prefix})\n`);
      const byName = new Map<string, number>();
      for (const s of services) byName.set(s.name, (byName.get(s.name) ?? 0) + 1);
      o.write(`actors: ${[...byName].map(([n, c]) => `${n} x${c}`).join(', ') || 'none'}\n`);
      for (const s of services) o.write(`  ${s.name} ${s.id} v${s.version}\n`);
      o.write(`tools: ${tools}\n`);
      for (const [stream, info] of Object.entries(streams))
        o.write(`stream ${stream}: ${JSON.stringify(info)}\n`);
      for (const c of consumers)
        o.write(
          `  consumer ${c.name}: pending ${c.pending}, in progress ${c.ack_pending}, redelivered ${c.redelivered}\n`,
        );
    }
    return 0;
  } finally {
    await bus.close();
  }
}
