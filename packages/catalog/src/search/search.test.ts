import { describe, expect, it } from 'vitest';
import { AgentMeshError } from '@agentmesh/protocol';
import { compileSafeRegex } from './safe-regex.js';
import { stem, tokenize } from '@agentmesh/protocol';
import { clampSearchLimit, createToolIndex, parameterText } from './tool-index.js';

describe('tokenize', () => {
  it('splits on case, "_", ".", "-" and stems lightly', () => {
    expect(tokenize('fs.read_file')).toEqual(['fs', 'read', 'file']);
    expect(tokenize('readFile HTTPServer x-request-id')).toEqual([
      'read',
      'file',
      'http',
      'server',
      'x',
      'request',
      'id',
    ]);
    expect(tokenize('Reading the files and hashed strings')).toEqual(['read', 'file', 'hash', 'string']);
    expect(stem('directories')).toBe('directory');
    expect(stem('running')).toBe('run');
    expect(stem('status')).toBe('status');
    expect(stem('create')).toBe(stem('creating'));
  });
});

describe('compileSafeRegex', () => {
  it('compiles ordinary patterns case-insensitively', () => {
    expect(compileSafeRegex('READ.*file').test('fs.read_file')).toBe(true);
    expect(compileSafeRegex('^(get|list)_pods?$').test('list_pods')).toBe(true);
    expect(compileSafeRegex('(?:ab)?c{2,3}[a-z+*]').test('ccc+')).toBe(true);
  });

  it.each([
    ['(', /does not compile/],
    ['[a-', /does not compile/],
    ['(a+)+$', /nested quantifiers/],
    ['(a*)*b', /nested quantifiers/],
    ['(\\w+\\s?)*$', /nested quantifiers/],
    ['(a|aa)*b', /alternation/],
    ['(x|y){2,}', /alternation/],
    ['.*.*.*x', /more than 2 unbounded/],
    ['(a)\\1', /backreferences/],
    ['(?=a)b', /lookaround/],
    ['x'.repeat(300), /limit is 256/],
    ['', /empty/],
  ])('rejects %s', (pattern, reason) => {
    const error = (() => {
      try {
        compileSafeRegex(pattern);
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(AgentMeshError);
    expect((error as AgentMeshError).code).toBe('invalid_request');
    expect((error as AgentMeshError).message).toMatch(reason);
  });
});

describe('tool index', () => {
  const tool = (name: string, description: string, input_schema?: Record<string, unknown>) => ({
    name,
    description,
    input_schema,
  });

  it('indexes name, description and parameter text; adds and removes incrementally', () => {
    const index = createToolIndex();
    index.add(tool('fs.read_file', 'Return the contents of a document'));
    index.add(
      tool('net.ping', 'Check a host', {
        type: 'object',
        properties: { hostname: { type: 'string', description: 'latency target' } },
      }),
    );
    expect(index.size).toBe(2);
    expect(index.search('read')[0]?.name).toBe('fs.read_file');
    expect(index.search('contents')[0]?.name).toBe('fs.read_file');
    expect(index.search('latency')[0]?.name).toBe('net.ping');
    expect(index.search('hostname')[0]?.name).toBe('net.ping');
    expect(index.remove('fs.read_file')).toBe(true);
    expect(index.remove('fs.read_file')).toBe(false);
    expect(index.search('read')).toEqual([]);
    index.add(tool('net.ping', 'Measure round trip time'));
    expect(index.size).toBe(1);
    expect(index.search('latency')).toEqual([]);
    expect(index.search('round trip')[0]?.name).toBe('net.ping');
  });

  it('breaks ties by name and honours the filter before the limit', () => {
    const index = createToolIndex();
    for (const n of ['z', 'b', 'm', 'a']) index.add(tool(`ns.${n}_tool`, 'same words here'));
    expect(index.search('same words', { limit: 3 }).map((h) => h.name)).toEqual([
      'ns.a_tool',
      'ns.b_tool',
      'ns.m_tool',
    ]);
    expect(
      index.search('same words', { limit: 2, filter: (n) => n !== 'ns.a_tool' }).map((h) => h.name),
    ).toEqual(['ns.b_tool', 'ns.m_tool']);
  });

  it('hybrid puts an exact name above broad prose matches', () => {
    const index = createToolIndex();
    index.add(tool('shell.run_command', 'Run a program'));
    for (let i = 0; i < 5; i++)
      index.add(tool(`misc.t${i}`, 'run the command and run another command to run commands'));
    expect(index.search('run_command', { strategy: 'hybrid' })[0]?.name).toBe('shell.run_command');
  });

  it('regex ranks name matches above description matches and stays within its budget', () => {
    const index = createToolIndex({ regexBudgetMs: 50 });
    index.add(tool('crypto.sha256', 'Hash a text'));
    index.add(tool('misc.digest', 'Uses sha256 inside'));
    expect(index.search('SHA256', { strategy: 'regex' }).map((h) => h.name)).toEqual([
      'crypto.sha256',
      'misc.digest',
    ]);
    for (let i = 0; i < 3000; i++) index.add(tool(`bulk.t${i}`, 'a'.repeat(600)));
    const started = performance.now();
    let outcome: unknown;
    try {
      outcome = index.search('a.*a.*x', { strategy: 'regex' });
    } catch (e) {
      outcome = e;
    }
    expect(performance.now() - started).toBeLessThan(5_000);
    if (outcome instanceof AgentMeshError) expect(outcome.code).toBe('timeout');
    else expect(outcome).toEqual([]);
  });

  it('rejects empty and oversized queries, and clamps limits', () => {
    const index = createToolIndex();
    index.add(tool('a.b', 'c'));
    expect(() => index.search('  ')).toThrow(/query must not be empty/);
    expect(() => index.search('x'.repeat(2000))).toThrow(/limit is 1024/);
    expect(index.search('zzz')).toEqual([]);
    expect(clampSearchLimit(0)).toBe(1);
    expect(clampSearchLimit(10_000)).toBe(50);
    expect(clampSearchLimit(undefined)).toBe(10);
    expect(clampSearchLimit(30, 20)).toBe(20);
  });

  it('collects parameter names, descriptions and enums', () => {
    expect(
      parameterText({
        type: 'object',
        properties: {
          op: { enum: ['add', 'sub'], description: 'operation' },
          nested: { type: 'object', properties: { deep: {} } },
        },
      }),
    ).toBe('op operation add sub nested deep');
  });
});
