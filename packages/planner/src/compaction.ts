import type { ChatMessage, ModelProvider } from './providers/types.js';

/** A rough token count (characters / 4), the estimate the budget and compaction use. */
export function estimateTranscriptTokens(messages: readonly ChatMessage[]): number {
  let chars = 0;
  for (const m of messages) {
    chars += m.content.length + 8;
    if (m.role === 'assistant' && m.tool_calls !== undefined)
      for (const c of m.tool_calls) chars += c.name.length + c.arguments.length + 8;
  }
  return Math.ceil(chars / 4);
}

export interface CompactionOptions {
  /** Compact once the transcript is estimated above this many tokens. */
  maxTokens: number;
  /** How much of the newest conversation to keep verbatim (default half of `maxTokens`). */
  keepTokens?: number;
  /** Writes the summary of the messages being replaced. */
  summarize: (older: readonly ChatMessage[], signal: AbortSignal) => Promise<string>;
  signal: AbortSignal;
}

export interface CompactionResult {
  messages: ChatMessage[];
  before_tokens: number;
  after_tokens: number;
  /** How many messages the summary replaced. */
  replaced: number;
}

export const SUMMARY_PREFIX = '[Summary of the earlier conversation]';

/**
 * Replaces the oldest messages by a summary when the transcript passes `maxTokens`. The cut is only ever made
 * before a user or assistant message, so a tool call is never separated from its result; the newest messages up to
 * `keepTokens` stay as they are. Returns undefined when nothing needs (or can be) compacted.
 */
export async function compactTranscript(
  messages: readonly ChatMessage[],
  options: CompactionOptions,
): Promise<CompactionResult | undefined> {
  const before = estimateTranscriptTokens(messages);
  if (before <= options.maxTokens) return undefined;
  const cut = cutIndex(messages, options.keepTokens ?? Math.floor(options.maxTokens / 2));
  if (cut <= 0) return undefined;
  const older = messages.slice(0, cut);
  const summary = `${SUMMARY_PREFIX}\n${(await options.summarize(older, options.signal)).trim()}`;
  const kept = messages.slice(cut);
  const first = kept[0];
  const compacted: ChatMessage[] =
    first?.role === 'user'
      ? [{ role: 'user', content: `${summary}\n\n${first.content}` }, ...kept.slice(1)]
      : [{ role: 'user', content: summary }, ...kept];
  return {
    messages: compacted,
    before_tokens: before,
    after_tokens: estimateTranscriptTokens(compacted),
    replaced: cut,
  };
}

/** The earliest index that keeps at most `keepTokens` of newest messages and is not a tool result. */
function cutIndex(messages: readonly ChatMessage[], keepTokens: number): number {
  let kept = 0;
  let cut = messages.length;
  for (let i = messages.length - 1; i > 0; i--) {
    kept += estimateTranscriptTokens([messages[i]!]);
    if (kept > keepTokens) break;
    if (messages[i]!.role !== 'tool') cut = i;
  }
  if (cut === messages.length) {
    for (let i = messages.length - 1; i > 0; i--) if (messages[i]!.role !== 'tool') return i;
    return 0;
  }
  return cut;
}

/**
 * A summary that needs no model (the scripted provider's): what the user asked, which tools ran and how they
 * ended, and the last answers, each shortened. Deterministic for the same messages.
 */
export function deterministicSummary(messages: readonly ChatMessage[], maxChars = 2_000): string {
  const lines: string[] = [];
  for (const m of messages) {
    if (m.role === 'user') lines.push(`- user: ${clip(m.content, 200)}`);
    else if (m.role === 'assistant') {
      if (m.content.trim() !== '') lines.push(`- assistant: ${clip(m.content, 200)}`);
      for (const c of m.tool_calls ?? []) lines.push(`- called ${c.name} ${clip(c.arguments, 120)}`);
    } else lines.push(`  -> ${m.name} ${m.is_error ? 'failed' : 'returned'}: ${clip(m.content, 120)}`);
  }
  return clip(lines.join('\n'), maxChars);
}

function clip(text: string, max: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length <= max ? flat : `${flat.slice(0, max - 1)}…`;
}

const SUMMARY_SYSTEM =
  'You compact a conversation. Summarize the transcript you are given for the assistant that continues it: the ' +
  "user's goals, decisions made, facts learned from tools, open questions. Be concise; answer with the summary only.";

/** Writes the summary of compacted turns: the model itself, or a deterministic digest for the scripted provider. */
export function summarizer(provider: ModelProvider) {
  return async (older: readonly ChatMessage[], signal: AbortSignal): Promise<string> => {
    const digest = deterministicSummary(older, 12_000);
    if (provider.kind === 'scripted') return digest;
    const turn = await provider.complete({
      model: provider.model,
      system: SUMMARY_SYSTEM,
      messages: [{ role: 'user', content: digest }],
      tools: [],
      parallelCalls: false,
      signal,
    });
    return turn.text.trim() === '' ? digest : turn.text;
  };
}
