import { describe, expect, it } from 'vitest';
import { approvalPolicy, approvalReason, approvalSummary, redactSecretArgs } from './approval-policy.js';

describe('approvalReason', () => {
  const configured = { require: ['fs.write_file', 'shell.*'], auto_approve: ['shell.read_command_output'] };

  it('requires what the tool or the configuration requires, unless auto-approved', () => {
    const policy = approvalPolicy(configured);
    expect(approvalReason('fs.write_file', {}, policy)).toBe('approvals.require');
    expect(approvalReason('shell.run_command', {}, policy)).toBe('approvals.require');
    expect(approvalReason('shell.read_command_output', {}, policy)).toBeUndefined();
    expect(approvalReason('math.calc', { needs_confirmation: true }, policy)).toBe(
      'the tool needs confirmation',
    );
    expect(approvalReason('math.calc', { needs_confirmation: false }, policy)).toBeUndefined();
  });

  it('lets a request add requirements but never remove configured ones', () => {
    const policy = approvalPolicy(configured, {
      require: ['crypto'],
      auto_approve: ['fs.write_file', 'shell.*'],
    });
    expect(approvalReason('crypto.sha256', {}, policy)).toBe('the run request requires approval');
    expect(approvalReason('fs.write_file', {}, policy)).toBe('approvals.require');
    expect(approvalReason('shell.run_command', {}, policy)).toBe('approvals.require');
    expect(approvalReason('math.calc', { needs_confirmation: true }, policy)).toBe(
      'the tool needs confirmation',
    );
  });

  it('lets a request exempt only what its own requirements caught', () => {
    const policy = approvalPolicy({}, { require: ['crypto'], auto_approve: ['crypto.sha256'] });
    expect(approvalReason('crypto.sha256', {}, policy)).toBeUndefined();
    expect(approvalReason('crypto.md5', {}, policy)).toBe('the run request requires approval');
  });

  it('takes the shorter of two timeouts, 0 meaning none', () => {
    expect(approvalPolicy({ timeout_ms: 0 }, { timeout_ms: 500 }).timeoutMs).toBe(500);
    expect(approvalPolicy({ timeout_ms: 300 }, { timeout_ms: 500 }).timeoutMs).toBe(300);
    expect(approvalPolicy({}, {}).timeoutMs).toBe(0);
  });
});

describe('redactSecretArgs', () => {
  const schema = {
    type: 'object',
    properties: {
      user: { type: 'string' },
      token: { type: 'string', writeOnly: true },
      nested: { type: 'object', properties: { password: { type: 'string', format: 'password' } } },
      list: {
        type: 'array',
        items: { type: 'object', properties: { key: { type: 'string', writeOnly: true } } },
      },
    },
  };

  it('replaces secret values at any depth and keeps the rest', () => {
    const args = {
      user: 'ann',
      token: 't0p',
      nested: { password: 'pw', other: 1 },
      list: [{ key: 'k1' }],
      extra: 2,
    };
    expect(redactSecretArgs(args, schema)).toEqual({
      user: 'ann',
      token: '[redacted]',
      nested: { password: '[redacted]', other: 1 },
      list: [{ key: '[redacted]' }],
      extra: 2,
    });
    expect(args.token).toBe('t0p');
  });
});

describe('approvalSummary', () => {
  it('names the tool and shortens long arguments', () => {
    expect(approvalSummary('fs.write_file', { path: 'a.txt' })).toBe('fs.write_file {"path":"a.txt"}');
    const long = approvalSummary('fs.write_file', { content: 'x'.repeat(500) }, 50);
    expect(long).toHaveLength(50);
    expect(long.endsWith('…')).toBe(true);
  });
});
