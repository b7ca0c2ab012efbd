import { ServiceName, type Backend } from '@agentmesh/protocol';
import { readScriptFile } from '@agentmesh/planner';
import { intFlag, listFlag, stringFlag } from '../args.js';
import { connectNats, type CommandContext } from '../context.js';
import { startEmbedded, type EmbeddedMesh } from '../embedded.js';
import { RunIndex } from '../console/run-index.js';
import { startConsoleServer, type FleetMember } from '../console/server.js';

function embeddedFleet(mesh: EmbeddedMesh): () => Promise<FleetMember[]> {
  const members: FleetMember[] = [
    { name: ServiceName.Catalog, id: 'embedded-catalog', version: '0.1.0', metadata: { mode: 'embedded' } },
    { name: ServiceName.Planner, id: mesh.planner.id, version: '0.1.0', metadata: { mode: 'embedded' } },
    {
      name: ServiceName.ToolWorker,
      id: mesh.worker.workerId,
      version: '0.1.0',
      metadata: { mode: 'embedded' },
    },
  ];
  return () => Promise.resolve(members);
}

/** Runs the console until SIGTERM/SIGINT. */
export async function consoleCommand(ctx: CommandContext): Promise<number> {
  const port = intFlag(ctx.args, 'port', 'AGENTMESH_CONSOLE_PORT') ?? 7070;
  const script = stringFlag(ctx.args, 'script');
  let bus: Backend;
  let mesh: EmbeddedMesh | undefined;
  let fleet: () => Promise<FleetMember[]>;
  if (ctx.natsUrl !== undefined) {
    const nats = await connectNats(ctx, 'agentmesh-console');
    bus = nats;
    fleet = () => nats.discover();
  } else {
    mesh = await startEmbedded({
      config: ctx.config,
      logger: ctx.logger,
      workspace: stringFlag(ctx.args, 'workspace', 'AGENTMESH_WORKSPACE'),
      tools: listFlag(ctx.args, 'tools'),
      approvals: true,
    });
    bus = mesh.bus;
    fleet = embeddedFleet(mesh);
  }
  const index = new RunIndex(bus, ctx.prefix, ctx.logger);
  await index.start();
  const server = await startConsoleServer({
    bus,
    prefix: ctx.prefix,
    index,
    logger: ctx.logger,
    fleet,
    port,
    ...(script ? { defaultScript: readScriptFile(script) } : {}),
    ...(stringFlag(ctx.args, 'host') ? { host: stringFlag(ctx.args, 'host')! } : {}),
  });
  ctx.io.stdout.write(`agentmesh console at ${server.link} (${mesh ? 'embedded' : `NATS ${ctx.natsUrl}`})\n`);
  await new Promise<void>((resolve) => {
    process.once('SIGTERM', () => resolve());
    process.once('SIGINT', () => resolve());
  });
  await server.close();
  index.stop();
  if (mesh) await mesh.stop();
  else await bus.close();
  return 0;
}
