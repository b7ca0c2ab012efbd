import { AgentMeshError, ErrorCode, type RunRequest } from '@agentmesh/protocol';
import { compactTranscript, estimateTranscriptTokens, summarizer } from '../compaction.js';
import {
  assertSessionId,
  type SessionLockHandle,
  type SessionRecord,
  type SessionStore,
} from './session-store.js';
import type { ChatMessage } from '../providers/types.js';
import type { RunConversation, StartingMessagesOptions } from '../run/ports.js';

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

/**
 * One run's hold on a session: the session lock (so one run at a time continues it; a second waits), the earlier
 * transcript it starts from (compacted past `max_tokens`), and the save of the whole conversation at its end.
 */
export class SessionHold implements RunConversation {
  private renewTimer: NodeJS.Timeout | undefined;
  /** How many of the conversation's messages came from the session (known once {@link startingMessages} ran). */
  private startCount: number | undefined;

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
  ): Promise<SessionHold> {
    const lock = await store.lock(target.tenant, target.session, {
      runId: target.runId,
      ttlMs: LOCK_TTL_MS,
      signal,
    });
    try {
      const record = await store.get(target.tenant, target.session);
      const runs = (record?.runs ?? []).filter((r) => r !== target.runId);
      return new SessionHold(
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
  async startingMessages(options: StartingMessagesOptions): Promise<ChatMessage[]> {
    const messages = await this.compacted(options);
    this.startCount = messages.length;
    return messages;
  }

  private async compacted(options: StartingMessagesOptions): Promise<ChatMessage[]> {
    if (estimateTranscriptTokens(this.history) <= options.maxTokens) return this.history;
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
   * no skill session, the earlier ones stay) and releases the lock. A run whose lock expired meanwhile (its planner
   * paused or cut off past the ttl) never writes over what another run saved: see {@link finishAfterLostLock}.
   */
  async finish(
    runId: string,
    messages: readonly ChatMessage[],
    activeSkills?: readonly string[],
  ): Promise<void> {
    clearInterval(this.renewTimer);
    if (!(await this.lock.renew())) return this.finishAfterLostLock(runId, messages, activeSkills);
    try {
      await this.store.save(this.record(runId, [...messages], this.runs, activeSkills));
    } finally {
      await this.lock.release();
    }
  }

  /**
   * The lock was taken by another run: this run takes it again only if it is free now (it never waits at its end).
   * Nobody saved meanwhile: saved as usual. Another run saved: this run's new turns are added after that run's, or,
   * when which messages are new is not known (a resumed run), the save is refused with the run that continued it.
   */
  private async finishAfterLostLock(
    runId: string,
    messages: readonly ChatMessage[],
    activeSkills: readonly string[] | undefined,
  ): Promise<void> {
    const lock = await this.store.tryLock(this.tenant, this.id, { runId, ttlMs: LOCK_TTL_MS });
    if (lock === undefined) throw sessionTaken(this.id, 'another run holds it now');
    try {
      const current = await this.store.get(this.tenant, this.id);
      const others = (current?.runs ?? []).filter((r) => r !== runId);
      if (others.length === this.runs.length && others.every((r, i) => r === this.runs[i]))
        return await this.store.save(this.record(runId, [...messages], this.runs, activeSkills));
      if (this.startCount === undefined) throw sessionTaken(this.id, `run ${others.at(-1)} continued it`);
      const added = messages.slice(this.startCount);
      await this.store.save({
        ...this.record(runId, [...(current?.messages ?? []), ...added], others, activeSkills),
        created_at: current?.created_at ?? this.createdAt ?? new Date().toISOString(),
      });
    } finally {
      await lock.release();
    }
  }

  private record(
    runId: string,
    messages: ChatMessage[],
    runs: readonly string[],
    activeSkills: readonly string[] | undefined,
  ): SessionRecord {
    const now = new Date().toISOString();
    return {
      version: 1,
      session: this.id,
      tenant: this.tenant,
      messages,
      runs: [...runs, runId],
      active_skills: [...(activeSkills ?? this.activeSkills)],
      created_at: this.createdAt ?? now,
      updated_at: now,
    };
  }

  /** Stops renewing the lock without releasing it (the run now belongs to another planner, which re-takes it). */
  stop(): void {
    clearInterval(this.renewTimer);
  }
}

/** The session a request continues, held (waiting for its lock); undefined when the request names none. */
export async function joinRequestedSession(
  sessions: (() => Promise<SessionStore>) | undefined,
  request: RunRequest,
  target: { tenant: string; runId: string },
  signal: AbortSignal,
): Promise<SessionHold | undefined> {
  const session = requestedSession(request);
  if (session === undefined) return undefined;
  const store = await sessions?.();
  if (store === undefined)
    throw new AgentMeshError('invalid_request', 'this planner keeps no sessions: run without "session"');
  return SessionHold.open(store, { ...target, session }, signal);
}

function sessionTaken(session: string, why: string): AgentMeshError {
  return new AgentMeshError(
    ErrorCode.Conflict,
    `session "${session}" not saved: this run's lock on it expired and ${why}; the run's turns are in its transcript`,
    { retryable: false, details: { session } },
  );
}
