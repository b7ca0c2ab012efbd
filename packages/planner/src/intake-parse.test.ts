import { describe, expect, it } from 'vitest';
import { FAST_CHECK_COMPILE_AFTER, RunRequestSchema } from '@agentmesh/protocol';
import { parseRunRequest } from './intake.js';

const plain = () => ({ id: 'run-1', task: 'add 2 and 3', script: [{ text: 'ok' }] });

/** Requests a hostile or careless client may send, each parsed by both ways. */
const corpus = (): unknown[] => [
  plain(),
  { task: 'hi' },
  { task: '  padded  ' },
  { task: '   ' },
  { task: '' },
  { task: 42 },
  null,
  'a string',
  [],
  { id: 'bad id!', task: 'x' },
  { task: 'x', unknown_field: true },
  { task: 'x', __proto__: { polluted: true } },
  JSON.parse('{"task":"x","__proto__":{"polluted":true}}'),
  { task: 'x', provider: 'scripted', model: 'm', system: 'be brief' },
  { task: 'x', provider: 'nope' },
  { task: 'x', model: '' },
  { task: 'x', base_url: 'not a url' },
  { task: 'x', base_url: 'http://localhost:1234/v1' },
  { task: 'x', identity: { tenant: 'acme', user: 'u' } },
  { task: 'x', identity: { user: 'u' } },
  { task: 'x', identity: { tenant: '' } },
  { task: 'x', identity: { tenant: 'acme', extra: 1 } },
  { task: 'x', priority: 0 },
  { task: 'x', priority: 2.5 },
  { task: 'x', priority: 5 },
  { task: 'x', limits: { max_iterations: 3, timeout_ms: 1000 } },
  { task: 'x', limits: { max_iterations: -1 } },
  { task: 'x', limits: { bogus: 1 } },
  { task: 'x', tool_retries: 11 },
  { task: 'x', tool_protocol: 'text' },
  { task: 'x', session: 'chat.1' },
  { task: 'x', session: 'bad/session' },
  { task: 'x', script: [{ text: 'ab', deltas: ['a', 'b'] }] },
  { task: 'x', script: [{ text: 'ab', deltas: ['a', 'c'] }] },
  { task: 'x', script: [{ tool_calls: [{ name: 'math__add' }] }] },
  { task: 'x', script: [{ tool_calls: [{ name: 'math__add', arguments: { a: 1 } }] }] },
  { task: 'x', script: [{ text: 'x', extra: 1 }] },
  { task: 'x', script: [{ usage: { input_tokens: 1.5, output_tokens: 1 } }] },
  { task: 'x', metadata: { a: 1 } },
  { task: 'x', daemon: { watch_paths: ['../etc'] } },
  { task: 'x', guardrails: [] },
  { task: 'x', id: 'a'.repeat(129) },
  { task: 'x', limits: { max_tokens: 2 ** 60 } },
  { task: 'x', tool_search: 'off' },
  { task: 'x', tool_search: 'bm25', tools: ['math.*', 'fs'], deferred: ['web.*'], always: ['math.calc'] },
  { task: 'x', tool_search: 'semantic' },
  { task: 'x', tools: [''] },
  { task: 'x', tools: ['x'.repeat(1_000)] },
  { task: 'x', tools: Array.from({ length: 1_000 }, (_, i) => `t${i}`) },
  { task: 'x', tools: 'math.*' },
  { task: 'x', always: [] },
  { task: 'x', require_successful_tools: ['fs.write'], stop_after_successful_tools: [''] },
  { task: 'x', require_successful_tools: [42] },
  { task: 'x', parent: { run_id: 'p', call_id: 'c', depth: 2 } },
  { task: 'x', parent: { run_id: 'p', call_id: 'c', depth: 0 } },
  { task: 'x', parent: { run_id: 'p', call_id: '' } },
  { task: 'x', parent: { run_id: 'p', call_id: 'c', extra: true } },
  { task: 'x', skills: [] },
  { task: 'x', skills: ['review', 'x'.repeat(129)] },
  { task: 'x', skills: Array.from({ length: 65 }, (_, i) => `s${i}`) },
  { task: 'x', tool_search: 'off', script: [{ tool_calls: [{ name: 'math.calc', arguments: {} }] }] },
];

describe('parseRunRequest', () => {
  it('answers exactly as zod does, before and after its check compiles, and takes a plain request as it is', () => {
    for (let round = 0; round < FAST_CHECK_COMPILE_AFTER + 8; round++)
      for (const value of corpus()) {
        const ours = parseRunRequest(value);
        const zod = RunRequestSchema.safeParse(value);
        expect(ours.success, JSON.stringify(value)).toBe(zod.success);
        if (zod.success) expect(ours.data).toStrictEqual(zod.data);
        else expect(ours.error?.issues).toStrictEqual(zod.error.issues);
      }
    const request = plain();
    expect(parseRunRequest(request).data).toBe(request);
    const scoped = {
      task: 'x',
      tool_search: 'off',
      tools: ['math.*'],
      parent: { run_id: 'p', call_id: 'c', depth: 1 },
      skills: ['review'],
    };
    expect(parseRunRequest(scoped).data).toBe(scoped);
    const padded = { task: ' padded ' };
    expect(parseRunRequest(padded).data).toStrictEqual({ task: 'padded' });
  });
});
