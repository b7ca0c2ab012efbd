import { describe, expect, it } from 'vitest';
import type { RunEvent } from '@agentmesh/protocol';
import { canonicalNames, createHumanRenderer, plural, runWarning } from './render.js';

function capture() {
  let text = '';
  return { out: { write: (t: string) => void (text += t) }, text: () => text };
}

const base = (seq: number, ts: string) => ({ run_id: 'r1', seq, ts });

describe('human renderer', () => {
  it('shows the duration of a finished run from its events, not from the time it is shown (runs show)', () => {
    const c = capture();
    const render = createHumanRenderer(c.out);
    const accepted = {
      type: 'run.accepted',
      ...base(1, '2026-01-01T10:00:00.000Z'),
      task: 't',
    } as unknown as RunEvent;
    const completed = {
      type: 'run.completed',
      ...base(2, '2026-01-01T10:00:02.500Z'),
      status: 'done',
      text: 'ok',
      iterations: 1,
      tool_calls: 1,
      usage: { input_tokens: 0, output_tokens: 0 },
    } as unknown as RunEvent;
    render(accepted);
    render(completed);
    expect(c.text()).toMatch(/done \(1 turn, 1 tool call, 2500 ms/);
  });

  it('says "1 tool" and "2 tools"', () => {
    expect(plural(1, 'tool')).toBe('1 tool');
    expect(plural(2, 'tool')).toBe('2 tools');
    const c = capture();
    createHumanRenderer(c.out)({
      type: 'llm.request',
      ...base(1, '2026-01-01T10:00:00.000Z'),
      iteration: 1,
      tools: ['math.calc'],
    } as unknown as RunEvent);
    expect(c.text()).toMatch(/asking the model with 1 tool\n/);
  });

  it('prints guardrail.tripped: what the rule did, at which stage', () => {
    const c = capture();
    const render = createHumanRenderer(c.out);
    for (const e of [
      { rule: 'no-secrets', stage: 'output', action: 'redact', count: 2 },
      { rule: 'no-force-push', stage: 'tools', action: 'block', call_id: 'c1' },
    ])
      render({ type: 'guardrail.tripped', ...base(1, 'x'), ...e } as unknown as RunEvent);
    expect(c.text()).toBe(
      '  ⛨ guardrail no-secrets redacted 2x (output)\n  ⛨ guardrail no-force-push blocked (tools [c1])\n',
    );
  });

  it('prints run.warning events as warnings', () => {
    const warning = {
      type: 'run.warning',
      ...base(2, 'x'),
      code: 'no_tools',
      message: 'no tools are registered: start a worker',
    };
    expect(runWarning(warning as unknown as RunEvent)).toEqual({
      code: 'no_tools',
      message: warning.message,
    });
    const c = capture();
    createHumanRenderer(c.out)(warning as unknown as RunEvent);
    expect(c.text()).toMatch(/warning: no tools are registered: start a worker/);
  });

  it('shows tool_search results with canonical names, not provider aliases', () => {
    expect(canonicalNames('found crypto__sha256 and fs__read_file; math.calc stays')).toBe(
      'found crypto.sha256 and fs.read_file; math.calc stays',
    );
    const c = capture();
    createHumanRenderer(c.out)({
      type: 'tool.completed',
      ...base(3, 'x'),
      call_id: 'c1',
      name: 'tool_search',
      worker_id: 'planner',
      elapsed_ms: 1,
      is_error: false,
      preview: '{"tools":["crypto__sha256"]}',
    } as unknown as RunEvent);
    expect(c.text()).toContain('crypto.sha256');
    expect(c.text()).not.toContain('crypto__sha256');
  });
});

describe('human renderer, errors', () => {
  it('prints a provider error once, without internal code tags', () => {
    const c = capture();
    const render = createHumanRenderer(c.out);
    const message = 'unavailable: no catalog answered on agentmesh.catalog.list';
    render({
      type: 'run.notice',
      ...base(1, 'x'),
      kind: 'error',
      message: 'no catalog answered on agentmesh.catalog.list',
    } as unknown as RunEvent);
    render({
      type: 'run.completed',
      ...base(2, 'x'),
      status: 'failed',
      text: '',
      reason: message,
      iterations: 0,
      tool_calls: 0,
      usage: { input_tokens: 0, output_tokens: 0 },
    } as unknown as RunEvent);
    expect(c.text().split('no catalog answered').length - 1).toBe(1);
    expect(c.text()).not.toContain('unavailable:');
  });
});
