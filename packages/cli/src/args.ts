import { parseArgs } from 'node:util';
import { AgentMeshError, ErrorCode } from '@agentmesh/protocol/errors';
import { closest } from './suggest.js';

/** Where a flag of `agentmesh run` applies: embedded only, or over NATS only. */
export type RunMode = 'embedded' | 'nats';

export interface FlagSpec {
  type: 'string' | 'boolean';
  description: string;
  short?: string;
  env?: string;
  /** The placeholder shown in help (`--nats URL`); default VALUE. */
  value?: string;
  /** The only mode this flag applies to, and where it belongs otherwise (`the workers: agentmesh worker --workspace`). */
  only?: { mode: RunMode; otherwise: string };
}

export interface CommandSpec {
  name: string;
  usage: string;
  summary: string;
  flags: Record<string, FlagSpec>;
  /** Subcommands (`tools list`, `runs show`): offered by completion and suggested on a typo. */
  verbs?: readonly string[];
}

/** Flags every command that talks to NATS takes. */
export const CONNECTION_FLAGS: Record<string, FlagSpec> = {
  nats: {
    type: 'string',
    value: 'URL',
    description: 'NATS URL (comma-separated for a cluster)',
    env: 'NATS_URL',
  },
  prefix: {
    type: 'string',
    value: 'PREFIX',
    description: 'subject prefix (default agentmesh)',
    env: 'AGENTMESH_PREFIX',
  },
  config: {
    type: 'string',
    value: 'FILE',
    description: 'configuration file (default ./agentmesh.yaml)',
    env: 'AGENTMESH_CONFIG',
  },
};

/**
 * `--tenant NAME` of the NATS client commands: use the tenant API of NAME (`<prefix>.tenant.NAME.…`, what a tenant's
 * NATS user is allowed, docs/tenancy.md) instead of the fleet's own subjects.
 */
export const TENANT_FLAG: Record<string, FlagSpec> = {
  tenant: {
    type: 'string',
    value: 'NAME',
    description: "on NATS: act as this tenant through its tenant API (a tenant's NATS user needs it)",
    env: 'AGENTMESH_TENANT',
  },
};

/** Flags of the long-running actor commands. */
export const ACTOR_FLAGS: Record<string, FlagSpec> = {
  ...CONNECTION_FLAGS,
  'health-port': {
    type: 'string',
    value: 'PORT',
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

/** A usage error (exit 2): the message, the command's usage line and where to find every flag. */
export function usageError(spec: CommandSpec, message: string): AgentMeshError {
  return new AgentMeshError(
    ErrorCode.InvalidRequest,
    `${message}\nusage: ${spec.usage}\nRun "agentmesh help ${spec.name}" for every flag.`,
    { details: { usage: true } },
  );
}

function unknownFlag(spec: CommandSpec, arg: string): AgentMeshError {
  const flag = arg.split('=')[0]!;
  const known = [...Object.keys(spec.flags), 'help'].map((n) => `--${n}`);
  const near = closest(flag, known);
  return usageError(
    spec,
    `unknown flag ${flag}${near.length > 0 ? ` (did you mean ${near.join(' or ')}?)` : ''}`,
  );
}

function findUnknownFlag(spec: CommandSpec, argv: string[]): string | undefined {
  const shorts = new Set(['h', ...Object.values(spec.flags).flatMap((f) => (f.short ? [f.short] : []))]);
  for (const arg of argv) {
    if (arg === '--') return undefined;
    if (arg.startsWith('--')) {
      const name = arg.slice(2).split('=')[0]!;
      if (name !== 'help' && spec.flags[name] === undefined) return arg;
    } else if (arg.startsWith('-') && arg.length > 1 && !shorts.has(arg[1]!)) return arg;
  }
  return undefined;
}

/** Parses argv against a command's flags; an unknown flag or a missing value is a usage error naming it. */
export function parseCommandArgs(spec: CommandSpec, argv: string[]): ParsedArgs {
  const options: Record<string, { type: 'string' | 'boolean'; short?: string }> = {
    help: { type: 'boolean', short: 'h' },
  };
  for (const [name, flag] of Object.entries(spec.flags))
    options[name] = { type: flag.type, ...(flag.short ? { short: flag.short } : {}) };
  const unknown = findUnknownFlag(spec, argv);
  if (unknown !== undefined) throw unknownFlag(spec, unknown);
  try {
    const { values, positionals } = parseArgs({ args: argv, options, allowPositionals: true, strict: true });
    return { values: values as ParsedArgs['values'], positionals };
  } catch (error) {
    const missing = /Option '(?:-\w, )?(--[\w-]+)/.exec((error as Error).message);
    throw usageError(spec, missing ? `${missing[1]} needs a value` : (error as Error).message);
  }
}

function flagLabel(name: string, flag: FlagSpec): string {
  const short = flag.short ? `-${flag.short}, ` : '';
  return `${short}--${name}${flag.type === 'string' ? ` ${flag.value ?? 'VALUE'}` : ''}`;
}

/** The flag lines of `--help`, one per flag: `  --nats URL  NATS URL (env NATS_URL)`. */
export function flagLines(spec: CommandSpec): string[] {
  const entries: [string, FlagSpec][] = [
    ...Object.entries(spec.flags),
    ['help', { type: 'boolean', short: 'h', description: 'show this help' }],
  ];
  const width = Math.max(...entries.map(([n, f]) => flagLabel(n, f).length));
  return entries.map(([name, flag]) => {
    const extras = [flag.env ? `env ${flag.env}` : '', flag.only ? `${flag.only.mode} only` : '']
      .filter(Boolean)
      .join('; ');
    return `  ${flagLabel(name, flag).padEnd(width)}  ${flag.description}${extras ? ` (${extras})` : ''}`;
  });
}

export function usageOf(spec: CommandSpec): string {
  return [`usage: ${spec.usage}`, '', spec.summary, '', 'flags:', ...flagLines(spec)].join('\n');
}

/**
 * Refuses flags given on the command line that do not apply to the chosen mode of `run`, saying where they belong.
 * Environment variables are not checked: they are shared by every command of a shell.
 */
export function checkModeFlags(spec: CommandSpec, args: ParsedArgs, mode: RunMode): void {
  for (const [name, flag] of Object.entries(spec.flags))
    if (flag.only && flag.only.mode !== mode && args.values[name] !== undefined)
      throw usageError(
        spec,
        `--${name} does not apply to ${mode === 'nats' ? 'a run on NATS (--nats)' : 'an embedded run'}: it belongs to ${flag.only.otherwise}`,
      );
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
