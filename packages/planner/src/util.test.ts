import { describe, expect, it } from 'vitest';
import { pino, type Logger } from 'pino';
import { lazyChild, stableStringify } from './util.js';

describe('stableStringify', () => {
  it('writes object keys in code-unit order at every depth, whatever order they were set in', () => {
    expect(stableStringify({ b: 1, a: { d: [2, { z: 1, y: 'x' }], c: null } })).toBe(
      '{"a":{"c":null,"d":[2,{"y":"x","z":1}]},"b":1}',
    );
    expect(stableStringify({ é: 1, Z: 2, a: 3, '10': 4, '9': 5 })).toBe('{"10":4,"9":5,"Z":2,"a":3,"é":1}');
  });

  it('leaves out undefined members, as JSON does, and writes the same text as JSON for sorted input', () => {
    expect(stableStringify({ a: undefined, b: 'q"uote', c: undefined })).toBe('{"b":"q\\"uote"}');
    expect(stableStringify({ a: undefined })).toBe('{}');
    const sorted = { a: [1, 'two', true, null], b: { c: 'ü\n' } };
    expect(stableStringify(sorted)).toBe(JSON.stringify(sorted));
  });
});

describe('lazyChild', () => {
  function recordingLogger(level: string) {
    const lines: Record<string, unknown>[] = [];
    const logger = pino(
      { level },
      { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) },
    );
    let children = 0;
    const child = logger.child.bind(logger);
    logger.child = ((...args: Parameters<Logger['child']>) => {
      children++;
      return child(...args);
    }) as Logger['child'];
    return { logger, lines, children: () => children };
  }

  it('makes the child on the first call that logs, with its bindings, and only once', () => {
    const { logger, lines, children } = recordingLogger('info');
    const log = lazyChild(logger, { run_id: 'r1' });
    expect(children()).toBe(0);
    log.info({ step: 1 }, 'first');
    log.warn('second');
    expect(children()).toBe(1);
    expect(lines.map((l) => [l.run_id, l.msg])).toEqual([
      ['r1', 'first'],
      ['r1', 'second'],
    ]);
    expect(log.info).toBe(log.info);
  });

  it('makes no child for a call at a level the parent does not log, and logs nothing', () => {
    const { logger, lines, children } = recordingLogger('info');
    const log = lazyChild(logger, { run_id: 'r2' });
    log.debug('dropped');
    log.trace('dropped too');
    expect(children()).toBe(0);
    expect(lines).toEqual([]);
    logger.level = 'debug';
    log.debug('kept');
    expect(children()).toBe(1);
    expect(lines.map((l) => [l.run_id, l.msg])).toEqual([['r2', 'kept']]);
  });

  it('follows a level set on it: the child then answers for itself', () => {
    const { logger, lines } = recordingLogger('info');
    const log = lazyChild(logger, { run_id: 'r3' });
    log.level = 'error';
    log.info('dropped by the child');
    log.error('kept');
    expect(lines.map((l) => l.msg)).toEqual(['kept']);
    expect(logger.level).toBe('info');
  });
});
