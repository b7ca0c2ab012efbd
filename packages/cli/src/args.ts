import { parseArgs } from 'node:util';
import { AgentMeshError, ErrorCode } from '@agentmesh/protocol';

export interface FlagSpec {
  type: 'string' | 'boolean';
  description: string;
  short?: string;
  env?: string;
}

export interface CommandSpec {
  name: string;
  usage: string;
  summary: string;
  flags: Record<string, FlagSpec>;
}

/** Flags every command that talks to NATS takes. */
export const CONNECTION_FLAGS: Record<string, FlagSpec> = {
  nats: { type: 'string', description: 'NATS URL (comma-separated for a cluster)', env: 'NATS_URL' },
  prefix: { type: 'string', description: 'subject prefix (default agentmesh)', env: 'AGENTMESH_PREFIX' },
  config: {
    type: 'string',
    description: 'configuration file (default ./agentmesh.yaml)',
    env: 'AGENTMESH_CONFIG',
  },
};

/** Flags of the long-running actor commands. */
export const ACTOR_FLAGS: Record<string, FlagSpec> = {
  ...CONNECTION_FLAGS,
  'health-port': {
    type: 'string',
    description: 'serve GET /healthz and /readyz on this port',
    env: 'AGENTMESH_HEALTH_PORT',
  },
  'metrics-port': {
    type: 'string',
    description: 'serve Prometheus metrics at GET /metrics on this port',
    env: 'AGENTMESH_METRICS_PORT',
  },
};

export interface ParsedArgs {
  values: Record<string, string | boolean | undefined>;
  positionals: string[];
}

/** Parses argv against a command's flags; an unknown flag or a missing value is a usage error naming it. */
export function parseCommandArgs(spec: CommandSpec, argv: string[]): ParsedArgs {
  const options: Record<string, { type: 'string' | 'boolean'; short?: string }> = {
    help: { type: 'boolean', short: 'h' },
  };
  for (const [name, flag] of Object.entries(spec.flags))
    options[name] = { type: flag.type, ...(flag.short ? { short: flag.short } : {}) };
  try {
    const { values, positionals } = parseArgs({ args: argv, options, allowPositionals: true, strict: true });
    return { values: values as ParsedArgs['values'], positionals };
  } catch (error) {
    throw new AgentMeshError(ErrorCode.InvalidRequest, `${(error as Error).message}\n\n${usageOf(spec)}`, {
      details: { usage: true },
    });
  }
}

export function usageOf(spec: CommandSpec): string {
  const lines = [`usage: ${spec.usage}`, '', spec.summary, '', 'flags:'];
  const entries = Object.entries(spec.flags);
  const width = Math.max(...entries.map(([n, f]) => n.length + (f.type === 'string' ? 6 : 0)), 10);
  for (const [name, flag] of entries) {
    const left = `--${name}${flag.type === 'string' ? ' VALUE' : ''}`.padEnd(width + 4);
    lines.push(`  ${left} ${flag.description}${flag.env ? ` (env ${flag.env})` : ''}`);
  }
  lines.push(`  ${'--help'.padEnd(width + 4)} show this help`);
  return lines.join('\n');
}

export function stringFlag(args: ParsedArgs, name: string, env?: string): string | undefined {
  const v = args.values[name];
  if (typeof v === 'string' && v !== '') return v;
  if (env !== undefined) {
    const e = process.env[env];
    if (e !== undefined && e !== '') return e;
  }
  return undefined;
}

export function intFlag(args: ParsedArgs, name: string, env?: string): number | undefined {
  const v = stringFlag(args, name, env);
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0)
    throw new AgentMeshError(
      ErrorCode.InvalidRequest,
      `--${name} must be a non-negative integer, got "${v}"`,
      {
        details: { usage: true },
      },
    );
  return n;
}

export function listFlag(args: ParsedArgs, name: string): string[] | undefined {
  const v = stringFlag(args, name);
  return v === undefined
    ? undefined
    : v
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s.length > 0);
}
