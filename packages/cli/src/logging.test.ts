import { afterEach, describe, expect, it } from 'vitest';
import { createCliLogger, humanLogLine, logLevelFromEnv } from './logging.js';

describe('CLI logs', () => {
  const saved = process.env['LOG_LEVEL'];
  afterEach(() => {
    if (saved === undefined) delete process.env['LOG_LEVEL'];
    else process.env['LOG_LEVEL'] = saved;
  });

  it('a bad LOG_LEVEL is an error naming the variable and the accepted values', () => {
    process.env['LOG_LEVEL'] = 'loud';
    expect(() => logLevelFromEnv('warn')).toThrow(
      /LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent; got "loud"/,
    );
    process.env['LOG_LEVEL'] = 'debug';
    expect(logLevelFromEnv('warn')).toBe('debug');
  });

  it('human mode writes human lines, not JSON', () => {
    let text = '';
    const logger = createCliLogger('t', {
      level: 'info',
      format: 'human',
      stderr: { write: (t) => void (text += t) },
    });
    logger.warn({ run_id: 'r1' }, 'something odd');
    expect(text).toBe('warn: something odd (run_id=r1)\n');
    expect(humanLogLine('not json')).toBe('not json');
  });
});
