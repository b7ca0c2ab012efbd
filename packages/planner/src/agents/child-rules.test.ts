import { describe, expect, it } from 'vitest';
import {
  assertMayScriptChild,
  assertMayStartChild,
  childApprovals,
  childLimits,
  childTools,
} from './child-rules.js';

const registered = ['crypto.sha256', 'crypto.md5', 'math.calc', 'fs.read_file', 'fs.write_file'];

describe('childTools', () => {
  it('inherits the parent list when the child asks for nothing', () => {
    expect(childTools(['crypto', 'math.calc'], undefined)).toEqual(['crypto', 'math.calc']);
    expect(childTools(undefined, undefined)).toBeUndefined();
  });

  it('accepts names, namespaces and globs inside the parent list', () => {
    expect(childTools(['crypto', 'math.calc'], ['crypto.sha256', 'math.calc'], registered)).toEqual([
      'crypto.sha256',
      'math.calc',
    ]);
    expect(childTools(['crypto'], ['crypto.*'], registered)).toEqual(['crypto.*']);
    expect(childTools(['crypto', 'math'], ['crypto'], registered)).toEqual(['crypto']);
  });

  it('refuses more than the parent may use, listing what is allowed', () => {
    expect(() => childTools(['crypto'], ['crypto.sha256', 'fs.write_file'], registered)).toThrow(
      /fs\.write_file not allowed; allowed: crypto/,
    );
    expect(() => childTools(['crypto.sha256'], ['crypto'], registered)).toThrow(
      /tools_not_allowed|not allowed/,
    );
    expect(() => childTools(['crypto.sha256'], ['*'], registered)).toThrow(/not allowed/);
    try {
      childTools(['math'], ['fs'], registered);
    } catch (e) {
      expect(e).toMatchObject({ code: 'tools_not_allowed', details: { refused: ['fs'], allowed: ['math'] } });
    }
  });
});

describe('childLimits', () => {
  it('caps every limit by what the parent has left', () => {
    expect(
      childLimits(
        { tool_calls: 5, time_ms: 1_000, tokens: 300, cost_usd: 0.5 },
        { max_tool_calls: 10, max_tokens: 100 },
      ),
    ).toMatchObject({ max_tool_calls: 5, timeout_ms: 1_000, max_tokens: 100, max_cost_usd: 0.5 });
    expect(childLimits({ tool_calls: 50, time_ms: 60_000 }, { timeout_ms: 5_000 })).toMatchObject({
      max_tool_calls: 50,
      timeout_ms: 5_000,
    });
  });

  it("caps iterations, concurrency, output bytes and nudges at the parent's own: a child may only lower them", () => {
    const parent = {
      tool_calls: 50,
      time_ms: 60_000,
      iterations: 4,
      tool_concurrency: 2,
      output_bytes: 1_024,
      nudges: 1,
    };
    expect(
      childLimits(parent, {
        max_iterations: 500,
        tool_concurrency: 256,
        max_output_bytes: 16 * 1024 * 1024,
        max_nudges: 100,
      }),
    ).toMatchObject({ max_iterations: 4, tool_concurrency: 2, max_output_bytes: 1_024, max_nudges: 1 });
    expect(childLimits(parent, {})).toMatchObject({ max_iterations: 4, tool_concurrency: 2, max_nudges: 1 });
    expect(childLimits(parent, { max_iterations: 2, tool_concurrency: 1, max_nudges: 0 })).toMatchObject({
      max_iterations: 2,
      tool_concurrency: 1,
      max_nudges: 0,
    });
  });
});

describe('childApprovals', () => {
  it("keeps the parent's policy and adds what the child asks for, never less", () => {
    const parent = { require: ['shell.*'], auto_approve: ['shell.echo'], timeout_ms: 5_000 };
    expect(childApprovals(parent, undefined)).toEqual(parent);
    expect(childApprovals(parent, ['fs.write_file', 'shell.*'])).toEqual({
      ...parent,
      require: ['shell.*', 'fs.write_file'],
    });
    expect(childApprovals(undefined, ['fs'])).toEqual({ require: ['fs'] });
    expect(childApprovals(undefined, undefined)).toBeUndefined();
  });
});

describe('assertMayScriptChild', () => {
  it('lets only a scripted parent script its child', () => {
    expect(() => assertMayScriptChild('scripted', [{ text: 'x' }])).not.toThrow();
    expect(() => assertMayScriptChild('openai', undefined)).not.toThrow();
    expect(() => assertMayScriptChild('openai', [{ text: 'x' }])).toThrow(
      expect.objectContaining({
        code: 'permission_denied',
        details: { field: 'script', provider: 'openai' },
      }),
    );
  });
});

describe('assertMayStartChild', () => {
  it('enforces depth and fan-out with named errors', () => {
    expect(() => assertMayStartChild({ depth: 1, childrenStarted: 0 })).not.toThrow();
    expect(() => assertMayStartChild({ depth: 2, childrenStarted: 0 })).toThrow(
      expect.objectContaining({ code: 'depth_exceeded' }),
    );
    expect(() => assertMayStartChild({ depth: 0, childrenStarted: 8 })).toThrow(
      expect.objectContaining({ code: 'too_many_children' }),
    );
    expect(() => assertMayStartChild({ depth: 0, childrenStarted: 3 }, { max_children: 3 })).toThrow(
      /max_children is 3/,
    );
  });
});
