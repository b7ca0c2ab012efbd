import type { Backend } from '@agentmesh/protocol';
import { readScriptFile } from '@agentmesh/planner';
import type { CommandContext } from '../context.js';
import { connectNats } from '../context.js';
import { RunIndex } from '../console/run-index.js';
import { startEmbedded, type EmbeddedMesh } from '../embedded.js';
import { loadApiKeys } from './auth.js';
import { startGateway } from './server.js';
import { IndexRunSource, NatsRunSource, type RunSource } from './source.js';

export interface GatewayFlags {
  port: number;
  host: string | undefined;
  tools: string[] | undefined;
  workspace: string | undefined;
  script: string | undefined;
}

interface Fleet {
  bus: Backend;
  source: RunSource;
  stop(): Promise<void>;
}

async function openFleet(ctx: CommandContext, flags: GatewayFlags): Promise<Fleet> {
  if (ctx.natsUrl !== undefined) {
    const bus = await connectNats(ctx, 'agentmesh-gateway');
    return { bus, source: new NatsRunSource(bus, ctx.prefix), stop: () => bus.close() };
  }
  const mesh: EmbeddedMesh = await startEmbedded({
    config: ctx.config,
    logger: ctx.logger,
    workspace: flags.workspace,
    tools: flags.tools,
    approvals: true,
  });
  const index = new RunIndex(mesh.bus, ctx.prefix, ctx.logger);
  await index.start();
  return {
    bus: mesh.bus,
    source: new IndexRunSource(index),
    stop: async () => {
      index.stop();
      await mesh.stop();
    },
  };
}

/** `agentmesh gateway`: the keys, the fleet (NATS or embedded), the server, until SIGTERM/SIGINT. */
export async function runGateway(ctx: CommandContext, flags: GatewayFlags): Promise<number> {
  const config = ctx.config.gateway ?? {};
  const keys = loadApiKeys({
    inline: config.api_keys,
    file: process.env['AGENTMESH_GATEWAY_KEYS_FILE'] ?? config.api_keys_file,
    env: process.env['AGENTMESH_GATEWAY_KEYS'],
  });
  if (config.api_keys !== undefined && Object.keys(config.api_keys).length > 0)
    ctx.logger.warn(
      {},
      'gateway.api_keys are inline in the configuration: keep keys out of committed files (api_keys_file or AGENTMESH_GATEWAY_KEYS)',
    );
  const fleet = await openFleet(ctx, flags);
  const gateway = await startGateway({
    bus: fleet.bus,
    prefix: ctx.prefix,
    source: fleet.source,
    logger: ctx.logger,
    keys,
    corsOrigins: config.cors_origins,
    port: flags.port,
    host: flags.host,
    ...(flags.script === undefined ? {} : { defaultScript: readScriptFile(flags.script) }),
  });
  const mode = ctx.natsUrl === undefined ? 'embedded' : `NATS ${ctx.natsUrl}`;
  ctx.io.stdout.write(`agentmesh gateway at ${gateway.url} (${mode})\n`);
  if (gateway.open) {
    ctx.io.stdout.write(
      'agentmesh gateway: no API keys configured: open access, every request acts as tenant "default"\n',
    );
    if (!['127.0.0.1', 'localhost', '::1', undefined].includes(flags.host))
      ctx.logger.warn(
        { host: flags.host },
        'the gateway is open (no API keys) on an address other machines reach',
      );
  } else
    ctx.io.stdout.write(
      `agentmesh gateway: ${keys.size} API key(s), ${new Set(keys.values()).size} tenant(s)\n`,
    );
  await new Promise<void>((resolve) => {
    process.once('SIGTERM', () => resolve());
    process.once('SIGINT', () => resolve());
  });
  await gateway.close();
  await fleet.stop();
  return 0;
}
