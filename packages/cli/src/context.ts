import {
  AgentMeshError,
  ErrorCode,
  connectBackend,
  DEFAULT_PREFIX,
  TENANT_NAME_PATTERN,
  type Backend,
  type Logger,
} from '@agentmesh/protocol';
import { stringFlag, type ParsedArgs } from './args.js';
import type { AgentMeshConfig } from './config.js';
import { configPath } from './config-path.js';
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
  /** Replicas of the JetStream assets this process creates (AGENTMESH_REPLICAS, `nats.replicas`; default 1). */
  replicas: number;
  logger: Logger;
  io: Io;
}

/**
 * Actor commands log at info by default, as JSON lines unless stderr is a terminal; one-shot commands (run, tools,
 * status) only warn, as human lines unless `--json` or LOG_FORMAT=json, to keep the terminal for output.
 */
export async function buildContext(
  args: ParsedArgs,
  io: Io,
  loggerName: string,
  quiet = false,
): Promise<CommandContext> {
  const level = logLevelFromEnv(quiet ? 'warn' : 'info');
  const jsonByDefault = quiet ? args.values['json'] === true : !io.stderr.isTTY;
  const format = logFormatFromEnv(jsonByDefault ? 'json' : 'human');
  const path = configPath(stringFlag(args, 'config'));
  // the schema of the configuration (and the planner's, MCP's) loads only when there is a file to check
  const config = path === undefined ? {} : (await import('./config.js')).loadConfig(path);
  return {
    args,
    config,
    prefix: stringFlag(args, 'prefix', 'AGENTMESH_PREFIX') ?? config.nats?.prefix ?? DEFAULT_PREFIX,
    natsUrl: stringFlag(args, 'nats', 'NATS_URL') ?? config.nats?.url,
    replicas: replicasSetting(config),
    logger: createCliLogger(loggerName, { level, format, stderr: io.stderr }),
    io,
  };
}

/**
 * The tenant whose API a NATS client command uses (`--tenant`, AGENTMESH_TENANT), or undefined for the fleet's own
 * subjects. A name that is no tenant name is a usage error.
 */
export function tenantOption(ctx: CommandContext): string | undefined {
  const tenant = stringFlag(ctx.args, 'tenant', 'AGENTMESH_TENANT');
  if (tenant === undefined || ctx.natsUrl === undefined) return tenant;
  if (!TENANT_NAME_PATTERN.test(tenant))
    throw new AgentMeshError(
      ErrorCode.InvalidRequest,
      `--tenant "${tenant}" is not a tenant name: 1-64 characters of a-z, 0-9, "_" or "-", starting with a letter or digit`,
      { retryable: false, details: { tenant } },
    );
  return tenant;
}

/**
 * Connects to NATS for an actor or a client command; credentials come from the URL or NATS_USER / NATS_PASSWORD. A
 * command on a tenant's API (`tenant` set) needs no JetStream: a tenant's NATS user has no access to it.
 */
export async function connectNats(
  ctx: CommandContext,
  name: string,
  options: { tenant?: string | undefined } = {},
): Promise<Backend> {
  if (ctx.natsUrl === undefined)
    throw new AgentMeshError(
      ErrorCode.InvalidConfig,
      `this command needs NATS: pass --nats URL or set NATS_URL (${name})`,
    );
  const user = process.env['NATS_USER'];
  const pass = process.env['NATS_PASSWORD'];
  const token = process.env['NATS_TOKEN'];
  return connectBackend({
    servers: ctx.natsUrl,
    name,
    logger: ctx.logger,
    ...(replicasConfigured(ctx.config) ? { replicas: ctx.replicas } : {}),
    ...(user ? { user, pass: pass ?? '' } : {}),
    ...(token ? { token } : {}),
    ...(options.tenant === undefined ? {} : { requireJetStream: false }),
  });
}

/** AGENTMESH_REPLICAS, else `nats.replicas` in the configuration, else 1. */
export function replicasSetting(config: AgentMeshConfig, env: NodeJS.ProcessEnv = process.env): number {
  const raw = env['AGENTMESH_REPLICAS'];
  if (raw === undefined || raw.trim() === '') return config.nats?.replicas ?? 1;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 5)
    throw new AgentMeshError(
      ErrorCode.InvalidConfig,
      `AGENTMESH_REPLICAS must be a whole number from 1 to 5, got "${raw}"`,
    );
  return n;
}

/**
 * True when replicas were set (AGENTMESH_REPLICAS or `nats.replicas`): only then are existing assets brought to
 * that count; otherwise a command keeps what the cluster has (a client never scales R3 assets down to 1).
 */
export function replicasConfigured(config: AgentMeshConfig, env: NodeJS.ProcessEnv = process.env): boolean {
  const raw = env['AGENTMESH_REPLICAS'];
  return (raw !== undefined && raw.trim() !== '') || config.nats?.replicas !== undefined;
}
