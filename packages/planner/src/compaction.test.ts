import { describe, expect, it } from 'vitest';
import type { ChatMessage } from './providers/types.js';
import {
  SUMMARY_PREFIX,
  compactTranscript,
  deterministicSummary,
  estimateTranscriptTokens as estimateTokens,
} from './compaction.js';

function turn(i: number, size = 400): ChatMessage[] {
  return [
    { role: 'user', content: `question ${i} ${'q'.repeat(size)}` },
    {
      role: 'assistant',
      content: '',
      tool_calls: [
        { id: `c${i}a`, name: 'crypto.sha256', arguments: '{"text":"a"}' },
        { id: `c${i}b`, name: 'math.calc', arguments: '{}' },
      ],
    },
    { role: 'tool', call_id: `c${i}a`, name: 'crypto.sha256', content: 'r'.repeat(size), is_error: false },
    { role: 'tool', call_id: `c${i}b`, name: 'math.calc', content: '5', is_error: false },
    { role: 'assistant', content: `answer ${i}` },
  ];
}

/** Every tool result follows, within its block, the assistant message that called it. */
function pairsWhole(messages: readonly ChatMessage[]): boolean {
  const open = new Set<string>();
  for (const m of messages) {
    if (m.role === 'assistant') {
      if (open.size > 0) return false;
      for (const c of m.tool_calls ?? []) open.add(c.id);
    } else if (m.role === 'tool') {
      if (!open.delete(m.call_id)) return false;
    } else if (open.size > 0) return false;
  }
  return open.size === 0;
}

const never = new AbortController().signal;
const summarize = async (older: readonly ChatMessage[]) => deterministicSummary(older);

describe('compactTranscript', () => {
  it('leaves a transcript under the limit alone', async () => {
    const messages = turn(1);
    expect(
      await compactTranscript(messages, { maxTokens: 10_000, summarize, signal: never }),
    ).toBeUndefined();
  });

  it('replaces the oldest turns by a summary and keeps every tool call with its result', async () => {
    const messages = Array.from({ length: 12 }, (_, i) => turn(i)).flat();
    const before = estimateTokens(messages);
    const result = await compactTranscript(messages, { maxTokens: before / 2, summarize, signal: never });
    expect(result).toBeDefined();
    expect(result!.before_tokens).toBe(before);
    expect(result!.after_tokens).toBeLessThan(before / 2);
    expect(result!.messages[0]!.role).toBe('user');
    expect(result!.messages[0]!.content.startsWith(SUMMARY_PREFIX)).toBe(true);
    expect(pairsWhole(result!.messages)).toBe(true);
    expect(result!.messages.at(-1)).toEqual(messages.at(-1));
  });

  it('never cuts between a tool call and its results, whatever the keep size', async () => {
    const messages = Array.from({ length: 6 }, (_, i) => turn(i, 50 + i * 97)).flat();
    for (let keep = 10; keep < estimateTokens(messages); keep += 37) {
      const result = await compactTranscript(messages, {
        maxTokens: 1,
        keepTokens: keep,
        summarize,
        signal: never,
      });
      if (result === undefined) continue;
      expect(pairsWhole(result.messages.slice(1))).toBe(true);
      expect(result.messages.filter((m) => m.role === 'tool').length % 2).toBe(0);
    }
  });
});

describe('deterministicSummary', () => {
  it('is the same for the same messages and names the calls', () => {
    const a = deterministicSummary(turn(1));
    expect(a).toBe(deterministicSummary(turn(1)));
    expect(a).toContain('called crypto.sha256');
    expect(a).toContain('math.calc returned: 5');
  });
});
