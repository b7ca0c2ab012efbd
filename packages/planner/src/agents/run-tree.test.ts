import { describe, expect, it } from 'vitest';
import type { RunEvent } from '@agentmesh/protocol';
import { childIds, formatRunTree, treeNode } from './run-tree.js';

const at = (s: number) => new Date(Date.UTC(2026, 10, 23, 12, 0, s)).toISOString();
const base = (runId: string, seq: number, s: number) => ({ run_id: runId, seq, ts: at(s) });

function finished(runId: string, cost?: number): RunEvent[] {
  return [
    { type: 'run.accepted', ...base(runId, 1, 0), task: `task of ${runId}` },
    { type: 'run.started', ...base(runId, 2, 0), planner_id: 'p1' },
    {
      type: 'run.completed',
      ...base(runId, 3, 2),
      status: 'done',
      text: 'ok',
      iterations: 1,
      tool_calls: 0,
      usage: { input_tokens: 10, output_tokens: 5 },
      ...(cost === undefined ? {} : { cost_usd: cost }),
    },
  ] as RunEvent[];
}

describe('run tree', () => {
  it('shows each run with its status, duration and cost, children under their parent', () => {
    const parent = treeNode('parent', [
      ...finished('parent', 0.0123),
      { type: 'agent.started', ...base('parent', 4, 1), call_id: 'c1', child_run_id: 'child-a' } as RunEvent,
    ]);
    parent.children = [
      treeNode('child-a', finished('child-a', 0.0042)),
      treeNode('child-b', finished('child-b')),
    ];
    const lines = formatRunTree(parent);
    expect(lines[0]).toBe('parent  done  2.0 s  $0.0123  (p1)  task of parent');
    expect(lines[1]).toBe('├─ child-a  done  2.0 s  $0.0042  (p1)  task of child-a');
    expect(lines[2]).toBe('└─ child-b  done  2.0 s  (p1)  task of child-b');
    expect(childIds([...finished('x'), ...finished('x')])).toEqual([]);
  });
});
