import { describe, expect, it } from 'vitest';
import { isAgentMeshError, type RunEvent, type RunEventBody } from '@agentmesh/protocol';
import type { ChatMessage } from '../model/chat.js';
import { forkPoints, forkState } from './fork-state.js';

const usage = { input_tokens: 1, output_tokens: 1 };

/** Stamps event bodies with run_id, seq from 1 and ts. */
function stamp(bodies: RunEventBody[]): RunEvent[] {
  return bodies.map((b, i) => ({ ...b, run_id: 'orig', seq: i + 1, ts: '2026-01-01T00:00:00Z' }) as RunEvent);
}

const call = (id: string, name = 'math.add') => ({ id, name, arguments: { a: 1, b: 2 } });
const result = (id: string, preview: string): RunEventBody => ({
  type: 'tool.completed',
  call_id: id,
  name: 'math.add',
  worker_id: 'w',
  elapsed_ms: 1,
  is_error: false,
  preview,
});

/**
 * A finished run: a session's earlier exchange, then turn 1 with two calls (found a deferred tool by search), turn 2
 * without calls (nudged), turn 3 with one call, an input, and turn 4's final answer.
 */
const events = stamp([
  { type: 'run.accepted', task: 'add things' }, // 1
  { type: 'run.started', planner_id: 'p' }, // 2
  { type: 'llm.request', iteration: 1, tools: ['math.add'] }, // 3
  { type: 'llm.response', iteration: 1, text: '', tool_calls: [call('c1'), call('c2')], usage }, // 4
  { type: 'tool.search', query: 'hash', strategy: 'bm25', results: ['crypto.digest'] }, // 5
  { type: 'tool.started', call_id: 'c1', name: 'math.add', worker_id: 'w' }, // 6
  result('c2', '3'), // 7
  result('c1', '3'), // 8
  { type: 'llm.request', iteration: 2, tools: ['math.add'] }, // 9
  { type: 'llm.response', iteration: 2, text: 'thinking', tool_calls: [], usage }, // 10
  { type: 'run.notice', kind: 'nudge', message: 'go on' }, // 11
  { type: 'llm.request', iteration: 3, tools: ['math.add'] }, // 12
  { type: 'llm.response', iteration: 3, text: '', tool_calls: [call('c3')], usage }, // 13
  result('c3', '5'), // 14
  { type: 'run.input', text: 'also double it' }, // 15
  { type: 'llm.request', iteration: 4, tools: ['math.add'] }, // 16
  { type: 'llm.response', iteration: 4, text: 'done: 10', tool_calls: [], usage }, // 17
  {
    type: 'run.completed',
    status: 'done',
    text: 'done: 10',
    iterations: 4,
    tool_calls: 3,
    usage,
  }, // 18
]);

const asked = (id: string) => ({ id, name: 'math.add', arguments: '{"a":1,"b":2}' });
const messages: ChatMessage[] = [
  { role: 'user', content: 'an earlier question' },
  { role: 'assistant', content: 'an earlier answer' },
  { role: 'user', content: 'add things' },
  { role: 'assistant', content: '', tool_calls: [asked('c1'), asked('c2')] },
  { role: 'tool', call_id: 'c1', name: 'math.add', content: '3 (full result)', is_error: false },
  { role: 'tool', call_id: 'c2', name: 'math.add', content: '3 (full result)', is_error: false },
  { role: 'assistant', content: 'thinking' },
  { role: 'user', content: 'go on' },
  { role: 'assistant', content: '', tool_calls: [asked('c3')] },
  { role: 'tool', call_id: 'c3', name: 'math.add', content: '5', is_error: false },
  { role: 'user', content: 'also double it' },
  { role: 'assistant', content: 'done: 10' },
];

const original = { run_id: 'orig', messages, events };

function refusalOf(seq: number): { code: string; reason: unknown; message: string } {
  try {
    forkState(original, seq);
  } catch (error) {
    if (!isAgentMeshError(error)) throw error;
    return { code: error.code, reason: error.details?.['reason'], message: error.message };
  }
  throw new Error(`seq ${seq} was not refused`);
}

describe('forkState: the conversation after an event', () => {
  it('before the first turn: the earlier session messages and the task', () => {
    for (const seq of [1, 2]) expect(forkState(original, seq).messages).toEqual(messages.slice(0, 3));
  });

  it("after turn 1's tool calls all finished: its assistant message and both results, in call order", () => {
    const state = forkState(original, 8);
    expect(state.messages).toEqual(messages.slice(0, 6));
    expect(state.messages.at(-1)).toMatchObject({ role: 'tool', call_id: 'c2', content: '3 (full result)' });
    expect(state.found).toEqual(['crypto.digest']);
    expect(state.succeeded).toEqual(['math.add']);
    expect(state.from).toEqual({ run_id: 'orig', seq: 8 });
  });

  it('a text-only turn counts once the nudge that followed it is in', () => {
    expect(forkState(original, 11).messages).toEqual(messages.slice(0, 8));
  });

  it('an input added between turns is in only from its own event on', () => {
    expect(forkState(original, 14).messages).toEqual(messages.slice(0, 10));
    expect(forkState(original, 15).messages).toEqual(messages.slice(0, 11));
  });

  it('returns a copy: changing the fork does not change the original', () => {
    const state = forkState(original, 15);
    state.messages.push({ role: 'user', content: 'more' });
    (state.messages[2] as { content: string }).content = 'changed';
    expect(messages[2]).toEqual({ role: 'user', content: 'add things' });
  });
});

describe('forkPoints', () => {
  it('names the start and the end of each turn whose calls all finished, each a seq forkState takes', () => {
    const points = forkPoints(events);
    expect(points).toEqual([
      { after_turn: 0, seq: 2 },
      { after_turn: 1, seq: 8 },
      { after_turn: 3, seq: 14 },
    ]);
    for (const p of points) expect(() => forkState(original, p.seq)).not.toThrow();
  });
});

describe('forkState: where forking is refused', () => {
  it('inside a model turn, naming the seq before it', () => {
    expect(refusalOf(3)).toMatchObject({ code: 'invalid_request', reason: 'inside_model_turn' });
    expect(refusalOf(3).message).toContain('fork at seq 2');
    expect(refusalOf(12)).toMatchObject({ reason: 'inside_model_turn' });
  });

  it('inside a turn whose tool calls had not all finished, naming the seq of the last result', () => {
    for (const seq of [4, 5, 6, 7])
      expect(refusalOf(seq)).toMatchObject({ code: 'invalid_request', reason: 'tools_unfinished' });
    expect(refusalOf(6).message).toContain('fork at seq 8 or later');
    expect(refusalOf(13)).toMatchObject({ reason: 'tools_unfinished' });
  });

  it("after the model's answer: nothing is left to ask", () => {
    expect(refusalOf(10)).toMatchObject({ reason: 'after_answer' });
    expect(refusalOf(17)).toMatchObject({ reason: 'after_answer' });
    expect(refusalOf(18)).toMatchObject({ reason: 'after_answer' });
  });

  it('beyond the last event', () => {
    expect(refusalOf(19)).toMatchObject({ code: 'invalid_request', reason: 'beyond_end' });
    expect(refusalOf(19).message).toContain('its last event is seq 18');
  });

  it('a turn whose calls never all finished (the run was stopped) cannot be forked after it', () => {
    const stopped = {
      run_id: 'orig',
      messages: messages.slice(0, 4),
      events: [...events.slice(0, 6), { ...events[17]!, seq: 7, status: 'cancelled' } as RunEvent],
    };
    expect(() => forkState(stopped, 7)).toThrow(/some never did\): fork at seq 2 or earlier/);
    expect(forkState(stopped, 2).messages).toEqual(messages.slice(0, 3));
  });

  it('a transcript that does not match its events is refused, not cut at a guess', () => {
    const short = { ...original, messages: messages.filter((m) => m.role !== 'tool') };
    expect(() => forkState(short, 8)).toThrow(/does not match its events/);
  });
});

describe('forkState: a turn asked again after a takeover', () => {
  it('counts the turn once: the answered repeat is the one in the transcript', () => {
    const redone = stamp([
      { type: 'run.accepted', task: 'add things' }, // 1
      { type: 'run.started', planner_id: 'p' }, // 2
      { type: 'llm.request', iteration: 1, tools: [] }, // 3
      { type: 'llm.response', iteration: 1, text: '', tool_calls: [call('c1')], usage }, // 4
      { type: 'run.started', planner_id: 'q', resumed: true }, // 5
      { type: 'llm.request', iteration: 1, tools: [] }, // 6
      { type: 'llm.response', iteration: 1, text: '', tool_calls: [call('c9')], usage }, // 7
      result('c9', '3'), // 8
    ]);
    const convo: ChatMessage[] = [
      { role: 'user', content: 'add things' },
      { role: 'assistant', content: '', tool_calls: [asked('c9')] },
      { role: 'tool', call_id: 'c9', name: 'math.add', content: '3', is_error: false },
    ];
    expect(forkState({ run_id: 'orig', messages: convo, events: redone }, 8).messages).toEqual(convo);
    expect(() => forkState({ run_id: 'orig', messages: convo, events: redone }, 4)).toThrow(/asked again/);
  });
});
