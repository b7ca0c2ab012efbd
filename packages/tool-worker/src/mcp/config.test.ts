import { describe, expect, it } from 'vitest';
import { isMcpToolSelected, mcpToolPolicy, parseMcpConfig, substituteEnv } from './config.js';
import { mcpToolName } from './tools.js';

describe('MCP configuration', () => {
  it('substitutes ${ENV} and names the server and variable when one is missing', () => {
    expect(substituteEnv('Bearer ${TOKEN}', 'remote', { TOKEN: 's3cret' })).toBe('Bearer s3cret');
    expect(() => substituteEnv('Bearer ${NOPE}', 'remote', {})).toThrow(
      /MCP server "remote": environment variable NOPE is not set/,
    );
  });

  it('selects tools with allow / deny globs and merges matching policies in order', () => {
    const server = parseMcpConfig({
      servers: {
        s: {
          command: 'x',
          tools: { allow: ['get-*', 'echo'], deny: ['get-env'] },
          tool_policies: { 'get-*': { read_only: true, timeout_ms: 5000 }, 'get-sum': { timeout_ms: 100 } },
        },
      },
    }).servers['s']!;
    expect(isMcpToolSelected('get-sum', server)).toBe(true);
    expect(isMcpToolSelected('echo', server)).toBe(true);
    expect(isMcpToolSelected('get-env', server)).toBe(false);
    expect(isMcpToolSelected('toggle', server)).toBe(false);
    expect(mcpToolPolicy('get-sum', server)).toEqual({ read_only: true, timeout_ms: 100 });
  });

  it('answers allow / deny globs built to backtrack at once, whatever a server names its tools', () => {
    const server = parseMcpConfig({
      servers: { s: { command: 'x', tools: { allow: ['*a*a*a*a*a*a*a*a*b', 'ok_?'] } } },
    }).servers['s']!;
    const started = performance.now();
    expect(isMcpToolSelected('a'.repeat(5_000), server)).toBe(false);
    expect(isMcpToolSelected('a'.repeat(5_000) + 'B', server)).toBe(true);
    expect(isMcpToolSelected('OK_1', server)).toBe(true);
    expect(performance.now() - started).toBeLessThan(100);
  });

  it('names the key of a bad server entry', () => {
    expect(() => parseMcpConfig({ servers: { a: {} } })).toThrow(/servers\.a.*exactly one of "command"/);
    expect(() => parseMcpConfig({ servers: { a: { url: 'http://x', args: ['y'] } } })).toThrow(
      /servers\.a.*stdio/,
    );
    expect(() => parseMcpConfig({ servers: { 'bad name!': { command: 'x' } } })).toThrow(/servers/);
    expect(() =>
      parseMcpConfig({ servers: { a: { command: 'x', tool_policies: { '*': { retries: -1 } } } } }),
    ).toThrow(/servers\.a\.tool_policies\.\*\.retries/);
  });

  it('makes canonical mcp.<server>.<tool> names and refuses ones that cannot be', () => {
    expect(mcpToolName('everything', 'get-sum')).toBe('mcp.everything.get_sum');
    expect(mcpToolName('GitHub', 'create_issue')).toBe('mcp.github.create_issue');
    expect(mcpToolName('s', '2fa__code')).toBe('mcp.s.x_2fa_code');
    expect(() => mcpToolName('s', 'x'.repeat(80))).toThrow(/MCP server "s": tool "x+" cannot be named/);
  });
});
