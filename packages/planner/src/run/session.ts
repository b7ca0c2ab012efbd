import type { Logger } from '@agentmesh/protocol';
import { compactTranscript, deterministicSummary, estimateTokens } from '../compaction.js';
import { assertSessionId, type SessionLockHandle, type SessionStore } from '../hitl/session-store.js';
import type { ChatMessage, ModelProvider } from '../providers/types.js';
import type { RunEventSink } from './events.js';

/** `sessions:` settings: when a session's transcript is compacted. */
export interface SessionDefaults {
  /** Compact a session's transcript once it is estimated above this many tokens (default 100000). */
  max_tokens?: number;
}

export const DEFAULT_SESSION_MAX_TOKENS = 100_000;
const LOCK_TTL_MS = 60_000;

/** The session a request continues (`session`, or its alias `identity.session`), validated; undefined for none. */
export function requestedSession(request: {
  session?: string | undefined;
  identity?: { session?: string | undefined } | undefined;
}): string | undefined {
  const id = request.session ?? request.identity?.session;
  if (id !== undefined) assertSessionId(id);
  return id;
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

/**
 * One run's hold on a session: the session lock (so one run at a time continues it; a second waits), the earlier
 * transcript it starts from (compacted past `max_tokens`), and the save of the whole conversation at its end.
 */
export class RunSession {
  private renewTimer: NodeJS.Timeout | undefined;

  private constructor(
    private readonly store: SessionStore,
    readonly tenant: string,
    readonly id: string,
    private readonly lock: SessionLockHandle,
    private readonly runs: string[],
    private readonly createdAt: string | undefined,
    readonly history: ChatMessage[],
    /** The skills active when the session's last run ended (its next run starts with them). */
    readonly activeSkills: readonly string[] = [],
  ) {
    this.renewTimer = setInterval(() => void this.lock.renew().catch(() => undefined), LOCK_TTL_MS / 3);
    this.renewTimer.unref();
  }

  static async open(
    store: SessionStore,
    target: { tenant: string; session: string; runId: string },
    signal: AbortSignal,
  ): Promise<RunSession> {
    const lock = await store.lock(target.tenant, target.session, {
      runId: target.runId,
      ttlMs: LOCK_TTL_MS,
      signal,
    });
    try {
      const record = await store.get(target.tenant, target.session);
      const runs = (record?.runs ?? []).filter((r) => r !== target.runId);
      return new RunSession(
        store,
        target.tenant,
        target.session,
        lock,
        runs,
        record?.created_at,
        record?.messages ?? [],
        record?.active_skills ?? [],
      );
    } catch (error) {
      await lock.release().catch(() => undefined);
      throw error;
    }
  }

  /** The earlier transcript, compacted (with `session.compacted`) when it passes `maxTokens`. */
  async startingMessages(options: {
    maxTokens: number;
    provider: ModelProvider;
    sink: RunEventSink;
    signal: AbortSignal;
    log: Logger;
  }): Promise<ChatMessage[]> {
    if (estimateTokens(this.history) <= options.maxTokens) return this.history;
    const result = await compactTranscript(this.history, {
      maxTokens: options.maxTokens,
      summarize: summarizer(options.provider),
      signal: options.signal,
    });
    if (result === undefined) return this.history;
    options.sink.emit({
      type: 'session.compacted',
      before_tokens: result.before_tokens,
      after_tokens: result.after_tokens,
    });
    options.log.info(
      { session: this.id, before_tokens: result.before_tokens, after_tokens: result.after_tokens },
      'session compacted',
    );
    return result.messages;
  }

  /**
   * Saves the conversation (earlier turns and this run's) and the skills active at its end (undefined: this run had
   * no skill session, the earlier ones stay) and releases the lock.
   */
  async finish(
    runId: string,
    messages: readonly ChatMessage[],
    activeSkills?: readonly string[],
  ): Promise<void> {
    clearInterval(this.renewTimer);
    try {
      const now = new Date().toISOString();
      await this.store.save({
        version: 1,
        session: this.id,
        tenant: this.tenant,
        messages: [...messages],
        runs: [...this.runs, runId],
        active_skills: [...(activeSkills ?? this.activeSkills)],
        created_at: this.createdAt ?? now,
        updated_at: now,
      });
    } finally {
      await this.lock.release();
    }
  }

  /** Stops renewing the lock without releasing it (the run now belongs to another planner, which re-takes it). */
  stop(): void {
    clearInterval(this.renewTimer);
  }
}
