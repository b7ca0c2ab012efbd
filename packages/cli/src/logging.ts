import { pino } from 'pino';
import { AgentMeshError, ErrorCode, type Logger } from '@agentmesh/protocol';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export const LOG_FORMATS = ['human', 'json'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

const LEVEL_NAMES: Record<number, string> = {
  10: 'trace',
  20: 'debug',
  30: 'info',
  40: 'warn',
  50: 'error',
  60: 'fatal',
};
const HIDDEN = new Set(['level', 'time', 'pid', 'hostname', 'name', 'msg']);

/** LOG_LEVEL, checked: a usage error (exit 2) naming the variable and the accepted values. */
export function logLevelFromEnv(fallback: string): string {
  const level = process.env['LOG_LEVEL'];
  if (level === undefined || level === '') return fallback;
  if (!(LOG_LEVELS as readonly string[]).includes(level))
    throw new AgentMeshError(
      ErrorCode.InvalidConfig,
      `LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}; got "${level}"`,
    );
  return level;
}

/** LOG_FORMAT, checked; `fallback` when unset. */
export function logFormatFromEnv(fallback: LogFormat): LogFormat {
  const format = process.env['LOG_FORMAT'];
  if (format === undefined || format === '') return fallback;
  if (!(LOG_FORMATS as readonly string[]).includes(format))
    throw new AgentMeshError(
      ErrorCode.InvalidConfig,
      `LOG_FORMAT must be one of ${LOG_FORMATS.join(', ')}; got "${format}"`,
    );
  return format as LogFormat;
}

/** One pino JSON line as a person reads it: `warn: message (key=value, ...)`. */
export function humanLogLine(json: string): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json;
  }
  const level = LEVEL_NAMES[entry['level'] as number] ?? String(entry['level']);
  const fields = Object.entries(entry)
    .filter(([k]) => !HIDDEN.has(k))
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`);
  return `${level}: ${String(entry['msg'] ?? '')}${fields.length > 0 ? ` (${fields.join(', ')})` : ''}\n`;
}

/** The CLI's logger on stderr: JSON lines (pino) or human lines, at the level LOG_LEVEL names. */
export function createCliLogger(
  name: string,
  options: { level: string; format: LogFormat; stderr: { write(text: string): void } },
): Logger {
  const base = {
    name,
    level: options.level,
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  if (options.format === 'json') return pino(base, pino.destination({ dest: 2, sync: false }));
  const stream = {
    write: (line: string) => {
      for (const one of line.split('\n')) if (one.trim() !== '') options.stderr.write(humanLogLine(one));
    },
  };
  return pino(base, stream);
}
