import { describe, expect, it } from 'vitest';
import { AGENT_TOOL_NAMES, offeredAgentTools } from './agent-tools.js';
import { childRunId } from './children.js';

describe('offeredAgentTools', () => {
  const names = (tools: string[] | undefined, enabled?: boolean) =>
    offeredAgentTools(tools, enabled === undefined ? {} : { enabled }).map((s) => s.name);

  it('offers the namespace, single tools or globs the allow-list names, all of them when enabled', () => {
    expect(names(['agent', 'math'])).toEqual([...AGENT_TOOL_NAMES]);
    expect(names(['agent.run', 'agent.list'])).toEqual(['agent.run', 'agent.list']);
    expect(names(['math'])).toEqual([]);
    expect(names(undefined)).toEqual([]);
    expect(names(['math'], true)).toEqual([...AGENT_TOOL_NAMES]);
  });
});

describe('childRunId', () => {
  it('is deterministic, differs by turn and call, and is a valid run id even for long parents', () => {
    expect(childRunId('p', 1, 'c1')).toBe(childRunId('p', 1, 'c1'));
    expect(childRunId('p', 1, 'c1')).not.toBe(childRunId('p', 2, 'c1'));
    expect(childRunId('p', 1, 'c1')).not.toBe(childRunId('p', 1, 'c2'));
    let id = 'r'.repeat(128);
    for (let depth = 0; depth < 5; depth++) id = childRunId(id, 1, 'call_1');
    expect(id).toMatch(/^[A-Za-z0-9_-]{1,128}$/);
  });
});
