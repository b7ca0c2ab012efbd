import { McpToolSource } from '@agentmesh/tool-worker';
import type { AddressInfo } from 'node:net';
import type { Backend } from '@agentmesh/protocol';
import { intFlag, listFlag, stringFlag } from '../args.js';
import { connectNats, type CommandContext } from '../context.js';
import { startEmbedded } from '../embedded.js';
import { accessToken } from '../http-access.js';
import { serveMcpHttp, serveMcpStdio, type McpServeOptions } from './mcp-serve.js';
import { mcpSpec } from '../specs/mcp.js';

/** The bus `mcp serve` and `a2a serve` work on: the fleet with --nats, else an embedded mesh (MCP servers included). */
export async function meshBus(
  ctx: CommandContext,
  name: string,
): Promise<{ bus: Backend; stop(): Promise<void> }> {
  if (ctx.natsUrl !== undefined) {
    const bus = await connectNats(ctx, name);
    return { bus, stop: () => bus.drain() };
  }
  const mesh = await startEmbedded({
    config: ctx.config,
    logger: ctx.logger,
    workspace: stringFlag(ctx.args, 'workspace', 'AGENTMESH_WORKSPACE'),
  });
  return { bus: mesh.bus, stop: () => mesh.stop() };
}

function untilSignal(): Promise<void> {
  return new Promise((resolve) => {
    process.once('SIGTERM', () => resolve());
    process.once('SIGINT', () => resolve());
  });
}

async function mcpServe(ctx: CommandContext): Promise<number> {
  const port = intFlag(ctx.args, 'http');
  const mesh = await meshBus(ctx, 'agentmesh-mcp');
  const deferred = [...(ctx.config.tools?.deferred ?? []), ...(listFlag(ctx.args, 'deferred') ?? [])];
  const options: McpServeOptions = {
    bus: mesh.bus,
    prefix: ctx.prefix,
    logger: ctx.logger,
    allow: listFlag(ctx.args, 'tools') ?? ctx.config.tools?.allow,
    ...(deferred.length > 0 ? { deferred } : {}),
    always: ctx.config.tools?.always,
  };
  try {
    if (port === undefined) {
      await serveMcpStdio(options);
      return 0;
    }
    const host = stringFlag(ctx.args, 'host') ?? '127.0.0.1';
    const { token, generated } = accessToken(
      stringFlag(ctx.args, 'token', 'AGENTMESH_MCP_TOKEN'),
      '--token (AGENTMESH_MCP_TOKEN)',
    );
    const http = await serveMcpHttp({
      ...options,
      port,
      host,
      token,
      sideEffectTools: listFlag(ctx.args, 'allow-tools') ?? [],
    });
    const bound = (http.address() as AddressInfo).port;
    ctx.io.stderr.write(`agentmesh MCP server at http://${host}:${bound}/mcp\n`);
    if (generated) ctx.io.stderr.write(`bearer token (new at each start): ${token}\n`);
    await untilSignal();
    await new Promise((resolve) => http.close(resolve));
    return 0;
  } finally {
    await mesh.stop();
  }
}

/** Connects to every configured MCP server once and prints its state and tool count. */
async function mcpList(ctx: CommandContext): Promise<number> {
  const source = await McpToolSource.connect(ctx.config.mcp, { logger: ctx.logger });
  try {
    const status = source.status();
    if (ctx.args.values['json'] === true) {
      ctx.io.stdout.write(`${JSON.stringify(status)}\n`);
    } else {
      if (status.length === 0)
        ctx.io.stdout.write('no MCP servers configured (mcp.servers in the configuration)\n');
      const width = Math.max(6, ...status.map((s) => s.name.length));
      for (const s of status) {
        ctx.io.stdout.write(
          `${s.name.padEnd(width)}  ${s.transport.padEnd(5)}  ${s.state.padEnd(9)}  ${s.tools} tools\n`,
        );
        for (const problem of s.problems) ctx.io.stdout.write(`${' '.repeat(width)}  ! ${problem}\n`);
      }
    }
    return status.some((s) => s.state === 'failed') ? 1 : 0;
  } finally {
    await source.close();
  }
}

export function mcpCommand(ctx: CommandContext): Promise<number> {
  const [verb] = ctx.args.positionals;
  if (verb === 'serve') return mcpServe(ctx);
  if (verb === 'list') return mcpList(ctx);
  ctx.io.stderr.write(`usage: ${mcpSpec.usage}\n`);
  return Promise.resolve(2);
}
