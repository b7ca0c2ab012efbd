import { AgentMeshError, ErrorCode, NatsBus, DEFAULT_PREFIX, type Logger } from '@agentmesh/protocol';
import { stringFlag, type ParsedArgs } from './args.js';
import { configPath, loadConfig, type AgentMeshConfig } from './config.js';
import { createCliLogger, logFormatFromEnv, logLevelFromEnv } from './logging.js';

export interface Io {
  stdout: { write(text: string): void; isTTY?: boolean };
  stderr: { write(text: string): void; isTTY?: boolean };
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
}

export interface CommandContext {
  args: ParsedArgs;
  config: AgentMeshConfig;
  prefix: string;
  natsUrl: string | undefined;
  logger: Logger;
  io: Io;
}

/**
 * Actor commands log at info by default, as JSON lines unless stderr is a terminal; one-shot commands (run, tools,
 * status) only warn, as human lines unless `--json` or LOG_FORMAT=json, to keep the terminal for output.
 */
export function buildContext(args: ParsedArgs, io: Io, loggerName: string, quiet = false): CommandContext {
  const level = logLevelFromEnv(quiet ? 'warn' : 'info');
  const jsonByDefault = quiet ? args.values['json'] === true : !io.stderr.isTTY;
  const format = logFormatFromEnv(jsonByDefault ? 'json' : 'human');
  const config = loadConfig(configPath(stringFlag(args, 'config')));
  return {
    args,
    config,
    prefix: stringFlag(args, 'prefix', 'AGENTMESH_PREFIX') ?? config.nats?.prefix ?? DEFAULT_PREFIX,
    natsUrl: stringFlag(args, 'nats', 'NATS_URL') ?? config.nats?.url,
    logger: createCliLogger(loggerName, { level, format, stderr: io.stderr }),
    io,
  };
}

/** Connects to NATS for an actor or a client command; credentials come from the URL or NATS_USER / NATS_PASSWORD. */
export async function connectNats(ctx: CommandContext, name: string): Promise<NatsBus> {
  if (ctx.natsUrl === undefined)
    throw new AgentMeshError(
      ErrorCode.InvalidConfig,
      `this command needs NATS: pass --nats URL or set NATS_URL (${name})`,
    );
  const user = process.env['NATS_USER'];
  const pass = process.env['NATS_PASSWORD'];
  const token = process.env['NATS_TOKEN'];
  return NatsBus.connect(
    ctx.natsUrl.split(',').map((s) => s.trim()),
    {
      name,
      logger: ctx.logger,
      ...(user ? { user, pass: pass ?? '' } : {}),
      ...(token ? { token } : {}),
    },
  );
}
