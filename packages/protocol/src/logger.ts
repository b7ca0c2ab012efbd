import { pino, type Logger, type LoggerOptions } from 'pino';

export type { Logger } from 'pino';

/**
 * Structured logs for every actor: JSON lines on stderr (stdout is left to command output), level from LOG_LEVEL.
 * Child loggers carry `run_id` and `call_id` bindings.
 */
export function createLogger(name: string, options: LoggerOptions = {}): Logger {
  return pino(
    {
      name,
      level: process.env['LOG_LEVEL'] ?? 'info',
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      ...options,
    },
    pino.destination({ dest: 2, sync: false }),
  );
}

/** A logger that writes nothing, for tests and library embedding. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
