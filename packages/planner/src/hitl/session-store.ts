import {
  AgentMeshError,
  ErrorCode,
  decodeMessage,
  decodeText,
  encodeJson,
  isAgentMeshError,
  sleep,
  type BlobStore,
  type KvStore,
  readEntries,
} from '@agentmesh/protocol';
import { z } from 'zod';
import { assertKnownSchema, withSchemaVersion } from '../model/versions.js';
import type { ChatMessage } from '../providers/types.js';

export const SESSION_ID_PATTERN = /^[A-Za-z0-9._-]{1,128}$/;

/** Refuses a session id over 128 characters or with characters outside `[A-Za-z0-9._-]`, naming the problem. */
export function assertSessionId(id: unknown, field = 'session'): asserts id is string {
  if (typeof id === 'string' && SESSION_ID_PATTERN.test(id)) return;
  const problem =
    typeof id !== 'string'
      ? 'must be a string'
      : id.length === 0 || id.length > 128
        ? `must be 1-128 characters long (got ${id.length})`
        : `may hold only letters, digits, ".", "_" and "-" (got ${JSON.stringify(id.slice(0, 40))})`;
  throw new AgentMeshError(ErrorCode.InvalidRequest, `invalid ${field}: ${problem}`, {
    retryable: false,
    details: { field },
  });
}

/** A conversation carried across runs: the transcript the next run continues from. */
export interface SessionRecord {
  /** The record's format (absent: 1); set on save. */
  schema_version?: number | undefined;
  version: 1;
  session: string;
  tenant: string;
  messages: ChatMessage[];
  /** Run ids in the order they continued the session. */
  runs: string[];
  /** Skills active when the last run ended. */
  active_skills?: string[];
  created_at: string;
  updated_at: string;
}

const SessionSchema = z.looseObject({
  version: z.literal(1),
  session: z.string(),
  tenant: z.string(),
  messages: z.array(z.unknown()),
  runs: z.array(z.string()),
});

export interface SessionSummary {
  session: string;
  runs: number;
  messages: number;
  updated_at: string;
}

export interface SessionLock {
  run_id: string;
  expires_at: number;
}

/**
 * Sessions, scoped by tenant: transcripts in a blob store (they outgrow a KV value), an index and one lock per
 * session in a KV bucket so that one run at a time continues it. A tenant never reads, continues, forks or deletes another
 * tenant's session: every name is built from the tenant.
 */
export class SessionStore {
  constructor(
    private readonly blobs: BlobStore,
    private readonly meta: KvStore,
  ) {}

  /** The sessions of one tenant, newest first. */
  async list(tenant: string): Promise<SessionSummary[]> {
    const entries = await readEntries(this.meta, `index.${encodeName(tenant)}.>`);
    const out = entries.map((entry) => JSON.parse(decodeText(entry.value)) as SessionSummary);
    return out.sort((a, b) => b.updated_at.localeCompare(a.updated_at));
  }

  async get(tenant: string, session: string): Promise<SessionRecord | undefined> {
    assertSessionId(session);
    const found = await this.blobs.get(blobName(tenant, session));
    if (found === null) return undefined;
    const record = decodeMessage(SessionSchema, found.data, 'session') as unknown as SessionRecord;
    return assertKnownSchema(`session "${session}"`, record);
  }

  async save(record: SessionRecord): Promise<void> {
    assertSessionId(record.session);
    const stored: SessionRecord = withSchemaVersion(record);
    await this.blobs.put(blobName(record.tenant, record.session), encodeJson(stored), {
      mime: 'application/json',
      meta: { tenant: record.tenant, session: record.session },
    });
    const summary: SessionSummary = {
      session: record.session,
      runs: record.runs.length,
      messages: record.messages.length,
      updated_at: record.updated_at,
    };
    await this.meta.put(indexKey(record.tenant, record.session), encodeJson(summary));
  }

  /** Appends a finished run's new messages to the session (creating it on first use). */
  async appendRun(
    tenant: string,
    session: string,
    run: { run_id: string; messages: readonly ChatMessage[]; active_skills?: string[] },
  ): Promise<SessionRecord> {
    const now = new Date().toISOString();
    const current = await this.get(tenant, session);
    const record: SessionRecord = {
      version: 1,
      session,
      tenant,
      messages: [...(current?.messages ?? []), ...run.messages],
      runs: [...(current?.runs ?? []), run.run_id],
      ...(run.active_skills === undefined ? {} : { active_skills: run.active_skills }),
      created_at: current?.created_at ?? now,
      updated_at: now,
    };
    await this.save(record);
    return record;
  }

  async fork(tenant: string, from: string, to: string): Promise<SessionRecord> {
    assertSessionId(to, 'new session id');
    const source = await this.get(tenant, from);
    if (source === undefined) throw notFound(tenant, from);
    if ((await this.get(tenant, to)) !== undefined)
      throw new AgentMeshError(ErrorCode.Conflict, `session "${to}" already exists`, { retryable: false });
    const now = new Date().toISOString();
    const copy: SessionRecord = { ...source, session: to, created_at: now, updated_at: now };
    await this.save(copy);
    return copy;
  }

  async delete(tenant: string, session: string): Promise<void> {
    if ((await this.get(tenant, session)) === undefined) throw notFound(tenant, session);
    await this.blobs.delete(blobName(tenant, session));
    await this.meta.delete(indexKey(tenant, session));
  }

  /**
   * Takes the session's lock for a run, waiting while another live run holds it. A lock whose holder stopped
   * renewing it expires after `ttlMs`; the same run id re-takes its own lock (a resumed run).
   */
  async lock(
    tenant: string,
    session: string,
    options: { runId: string; ttlMs: number; signal: AbortSignal },
  ): Promise<SessionLockHandle> {
    assertSessionId(session);
    const key = lockKey(tenant, session);
    for (;;) {
      if (options.signal.aborted)
        throw new AgentMeshError(ErrorCode.Cancelled, `stopped waiting for session "${session}"`, {
          retryable: false,
        });
      const taken = await this.take(key, options);
      if (taken instanceof SessionLockHandle) return taken;
      if (taken !== undefined)
        await waitForChange(this.meta, taken.revision, {
          key,
          ms: taken.expiresAt - Date.now(),
          signal: options.signal,
        });
    }
  }

  /** The session's lock for a run if no other live run holds it, else undefined (at once, no waiting). */
  async tryLock(
    tenant: string,
    session: string,
    options: { runId: string; ttlMs: number },
  ): Promise<SessionLockHandle | undefined> {
    assertSessionId(session);
    const key = lockKey(tenant, session);
    for (;;) {
      const taken = await this.take(key, options);
      if (taken instanceof SessionLockHandle) return taken;
      if (taken !== undefined) return undefined;
    }
  }

  /** One attempt at the lock: its handle, the entry another live run holds, or undefined after a lost race. */
  private async take(
    key: string,
    options: { runId: string; ttlMs: number },
  ): Promise<SessionLockHandle | { revision: number; expiresAt: number } | undefined> {
    const value = encodeJson({ run_id: options.runId, expires_at: Date.now() + options.ttlMs });
    const entry = await this.meta.get(key);
    try {
      if (entry === null) {
        const revision = await this.meta.create(key, value);
        return new SessionLockHandle(this.meta, key, options.runId, options.ttlMs, revision);
      }
      const held = readLock(entry.value);
      if (held.run_id !== options.runId && held.expires_at > Date.now())
        return { revision: entry.revision, expiresAt: held.expires_at };
      const revision = await this.meta.update(key, value, entry.revision);
      return new SessionLockHandle(this.meta, key, options.runId, options.ttlMs, revision);
    } catch (error) {
      if (!isAgentMeshError(error, ErrorCode.Conflict)) throw error;
      return undefined;
    }
  }
}

/**
 * A held session lock: renew it while the run lives, release it when the run ends. Every write is a compare-and-set
 * on the revision this handle wrote last, so a holder whose lock expired (a paused or partitioned planner) and was
 * taken by another run learns it has lost the lock instead of writing over the other run's.
 */
export class SessionLockHandle {
  private holding = true;

  constructor(
    private readonly kv: KvStore,
    private readonly key: string,
    readonly runId: string,
    private readonly ttlMs: number,
    private revision: number,
  ) {}

  /** False once a renewal found the lock held by another run, or gone. */
  get held(): boolean {
    return this.holding;
  }

  /**
   * Extends the lock by its ttl; false (and {@link held} false from then on) when another run holds it or it is
   * gone. A write of ours that landed without an answer is taken as ours: the lock still names this run.
   */
  async renew(): Promise<boolean> {
    for (let attempt = 1; this.holding; attempt++) {
      const value = encodeJson({ run_id: this.runId, expires_at: Date.now() + this.ttlMs });
      try {
        this.revision = await this.kv.update(this.key, value, this.revision);
        return true;
      } catch (error) {
        if (!isAgentMeshError(error, ErrorCode.Conflict) || attempt === 3) throw error;
      }
      const entry = await this.kv.get(this.key);
      if (entry === null || readLock(entry.value).run_id !== this.runId) this.holding = false;
      else this.revision = entry.revision;
    }
    return false;
  }

  /** Lets the lock go, unless another run holds it by now (a compare-and-set, never a blind delete). */
  async release(): Promise<void> {
    if (!this.holding) return;
    const free = encodeJson({ run_id: '', expires_at: 0 });
    try {
      this.revision = await this.kv.update(this.key, free, this.revision);
    } catch (error) {
      if (!isAgentMeshError(error, ErrorCode.Conflict)) throw error;
      const entry = await this.kv.get(this.key);
      if (entry !== null && readLock(entry.value).run_id === this.runId)
        await this.kv.update(this.key, free, entry.revision);
    } finally {
      this.holding = false;
    }
  }
}

function readLock(value: Uint8Array): SessionLock {
  return JSON.parse(decodeText(value)) as SessionLock;
}

function encodeName(text: string): string {
  return Buffer.from(text, 'utf8').toString('base64url') || '_';
}

function blobName(tenant: string, session: string): string {
  return `sessions/${encodeName(tenant)}/${session}`;
}

function lockKey(tenant: string, session: string): string {
  return `session.${encodeName(tenant)}.${encodeName(session)}`;
}

/**
 * Resolves when the key no longer holds revision `seen` (changed or deleted), after `ms` at the latest, or when the
 * signal aborts. The key is read again once the watch is up, so a change made before the watch started is not missed.
 */
async function waitForChange(
  kv: KvStore,
  seen: number,
  wait: { key: string; ms: number; signal: AbortSignal },
): Promise<void> {
  const { key, signal } = wait;
  if (signal.aborted) return;
  const changed = new AbortController();
  const onAbort = () => changed.abort();
  signal.addEventListener('abort', onAbort, { once: true });
  const watcher = await kv.watch(() => changed.abort(), { key, updatesOnly: true });
  try {
    if ((await kv.get(key))?.revision !== seen) return;
    await sleep(Math.max(1, wait.ms), changed.signal);
  } finally {
    watcher.stop();
    signal.removeEventListener('abort', onAbort);
  }
}

function indexKey(tenant: string, session: string): string {
  return `index.${encodeName(tenant)}.${encodeName(session)}`;
}

function notFound(tenant: string, session: string): AgentMeshError {
  return new AgentMeshError(ErrorCode.NotFound, `no session "${session}" for tenant "${tenant}"`, {
    retryable: false,
  });
}
